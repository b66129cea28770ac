// The document's schemas as JSON Schema 2020-12 (OpenAPI 3.1's dialect),
// compiled by Ajv with the document's components reachable by their
// "#/components/..." references.
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

// compile(schema) -> validate function; throws for a schema that is not
// valid JSON Schema or names a component that does not exist.
export function schemaCompiler(doc, options = {}) {
  const ajv = new Ajv2020({ allErrors: true, strict: false, ...options });
  addFormats(ajv);
  ajv.addSchema({ $id: "openapi.json", components: doc.components });
  const rebase = (v) =>
    Array.isArray(v) ? v.map(rebase)
    : v && typeof v === "object"
      ? Object.fromEntries(Object.entries(v).map(([k, x]) =>
          [k, k === "$ref" && typeof x === "string" && x.startsWith("#/") ? `openapi.json${x}` : rebase(x)]))
      : v;
  return (schema) => ajv.compile(rebase(schema));
}
