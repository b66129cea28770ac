/* One template with two decisions and two maps, as a store reads it
 * (tk__flow_read), shared by tests/store/test_flow.c and
 * fuzz/fuzz_flow.c:
 *   score -> triage (decides approve, review; not allow_none);
 *   pick (decides left, right; allow_none; branches_key "go");
 *   list -> process (map over {{parents.list.files}}, max 5);
 *   count -> chunks (map range {{parents.count.rows}}, chunk 3, max 5,
 *   max_failures 1). */
#ifndef TASKER_TESTS_FLOW_FIXTURE_H
#define TASKER_TESTS_FLOW_FIXTURE_H

static const char flow_definition[] =
    "{\"name\":\"flow\",\"steps\":["
    "{\"name\":\"score\"},"
    "{\"name\":\"triage\",\"decides\":[\"approve\",\"review\"],\"allow_none\":false,"
    "\"branches_key\":\"branches\"},"
    "{\"name\":\"approve\"},"
    "{\"name\":\"review\"},"
    "{\"name\":\"pick\",\"decides\":[\"left\",\"right\"],\"allow_none\":true,"
    "\"branches_key\":\"go\"},"
    "{\"name\":\"left\"},"
    "{\"name\":\"right\"},"
    "{\"name\":\"list\"},"
    "{\"name\":\"process\",\"map\":{\"parent\":\"list\",\"path\":[\"files\"],\"max\":5,"
    "\"max_failures\":0}},"
    "{\"name\":\"count\"},"
    "{\"name\":\"chunks\",\"map\":{\"parent\":\"count\",\"path\":[\"rows\"],\"range\":true,"
    "\"chunk\":3,\"max\":5,\"max_failures\":1}}]}";

enum { SCORE, TRIAGE, APPROVE, REVIEW, PICK, LEFT, RIGHT, LIST, PROCESS, COUNT, CHUNKS, NSTEPS };

/* Pairs parent, child. */
static const int flow_edges[] = {SCORE, TRIAGE, TRIAGE, APPROVE, TRIAGE, REVIEW, PICK, LEFT,
                                 PICK,  RIGHT,  LIST,   PROCESS, COUNT,  CHUNKS};

#define FLOW_NEDGES ((int)(sizeof flow_edges / sizeof flow_edges[0] / 2))

#endif
