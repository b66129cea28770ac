// node validate.mjs DOC.json: the OpenAPI document a running `tasker serve`
// served (tests/server/openapi.sh fetched it) checked by the pinned
// validator (@seriousme/openapi-schema-validator, OpenAPI 3.1's own JSON
// schema and its $refs), every schema in it compiled as JSON Schema
// 2020-12 (Ajv), and the same validator shown to refuse a broken copy, so
// that a pass means something. One line per check: "ok<TAB>NAME" or
// "not ok<TAB>NAME<TAB>WHY".
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import { schemaCompiler } from "./schemas.mjs";

const say = (ok, name, why = "") =>
  console.log(ok ? `ok\t${name}` : `not ok\t${name}\t${why.replace(/\s+/g, " ")}`);

const doc = JSON.parse(readFileSync(process.argv[2], "utf8"));

const result = await new Validator().validate(structuredClone(doc));
say(result.valid, "the served document is valid OpenAPI 3.1 (@seriousme/openapi-schema-validator)",
  JSON.stringify(result.errors ?? []).slice(0, 2000));
say(doc.openapi === "3.1.0", "openapi is 3.1.0", `openapi: ${doc.openapi}`);

// Every schema is JSON Schema 2020-12 that compiles (a misspelt type or a
// dangling $ref fails here even where OpenAPI's own schema lets it by).
const compile = schemaCompiler(doc);
const bad = [];
for (const name of Object.keys(doc.components.schemas)) {
  try {
    compile({ $ref: `#/components/schemas/${name}` });
  } catch (e) {
    bad.push(`${name}: ${e.message}`);
  }
}
say(bad.length === 0, "every component schema compiles as JSON Schema 2020-12", bad.join("; "));

// The validator refuses what is broken: no info, a $ref to nothing, a
// response with no description.
const broken = [
  ["no info", (d) => delete d.info],
  ["a $ref to nothing", (d) => { d.paths["/api/v1/status"].get.responses["200"].content["application/json"].schema = { $ref: "#/components/schemas/Nothing" }; }],
  ["a response without its description", (d) => delete d.components.responses.E404.description],
];
for (const [what, breakIt] of broken) {
  const copy = structuredClone(doc);
  breakIt(copy);
  const r = await new Validator().validate(copy);
  say(!r.valid, `the validator refuses a document with ${what}`, "it said valid");
}
