# Bulk submit (issue 22 item 3) through the real binary on the store
# $W/tasker.toml names: `tasker submit NAME --contexts FILE|-` and `POST
# /api/v1/tasks` with an array. Lines and elements become tasks in order,
# identities behave as a single submit's (an existing one and a repeat
# within the call give the first task's id, nothing created), task.created
# goes out per created task, batch items and delayed starts are stored as
# a single submit stores them, the tasks run; a bad line or element is
# refused with its number and what was wrong, and the store is unchanged.
# Sourced after tap.sh (and pg.sh for PostgreSQL) by tests/cli/submit_many.sh
# and submit_many_pg.sh; needs `t`, W, curl and jq. sm_run runs it all.
# `tasker serve` is started and stopped by tests/lib/serve.sh's serve_start
# and serve_stop (flow_views.sh sources it).
. "$(dirname "$0")/../lib/flow_views.sh"

sm_templates() {
  cat >"$W/order.toml" <<'TOML'
name = "order"
version = "1"
[[steps]]
name = "check"
handler = { kind = "builtin", name = "noop" }
[[steps]]
name = "ship"
depends_on = ["check"]
handler = { kind = "builtin", name = "noop" }
TOML
  cat >"$W/mail.toml" <<'TOML'
name = "mail"
version = "1"
[[steps]]
name = "send"
handler = { kind = "builtin", name = "batch" }
batch = { items_from = "to", max_item_attempts = 3 }
TOML
}

# sm_snapshot: what the store holds, through the binary: the tasks (id,
# state, identity, steps) and the steps' and tasks' counts by state.
sm_snapshot() {
  t tasks --json --limit 1000 | jq -c '[.tasks[] | [.id, .state, .identity, .steps_total]]'
  t status --json | jq -c '[.tasks, .steps]'
}

# sm_refused NAME INPUT WANT_ERR: `submit order --contexts -` with INPUT on
# stdin exits 2 with stderr WANT_ERR, and the store is as it was.
sm_refused() {
  sr_before=$(sm_snapshot)
  printf '%s' "$2" >"$W/in.jsonl"
  run t submit order --contexts - <"$W/in.jsonl"
  expect_rc "$1: exit 2" 2
  expect_eq "$1: the line and what was wrong" "$ERR" "$3"
  expect_eq "$1: nothing stored" "$(sm_snapshot)" "$sr_before"
}

sm_cli() {
  # An identity that exists before the call.
  run t submit order --identity old --context '{"n": 0}'
  expect_rc "single submit with identity old" 0
  expect_eq "its id" "$OUT" 1
  printf '%s\n' '{"context": {"n": 1}}' '' '{"context": {"n": 2}, "identity": "a"}' \
    '{"identity": "old", "context": {"n": 3}}' '{"identity": "a", "context": {"n": 4}}' '{}' \
    >"$W/orders.jsonl"
  run t submit order --contexts "$W/orders.jsonl" --events "$W/events.jsonl"
  expect_rc "--contexts FILE" 0
  expect_eq "an id per line, in order; identities as a single submit's" "$OUT" "2
3
1
3
4"
  expect_eq "the existing identities named by line" "$ERR" \
"$W/orders.jsonl:4: task 1 already exists with identity \"old\"; nothing submitted
$W/orders.jsonl:5: task 3 already exists with identity \"a\"; nothing submitted"
  expect_eq "task.created for each created task, in order" \
    "$(jq -c '[.type, .task, .identity]' "$W/events.jsonl" | tr '\n' ' ')" \
    '["task.created",2,null] ["task.created",3,"a"] ["task.created",4,null] '
  expect_eq "contexts and identities stored" \
    "$(for id in 2 3 4; do t show "$id" --json | jq -c '[.context, .identity, [.steps[].name]]'; done)" \
    '[{"n":1},null,["check","ship"]]
[{"n":2},"a",["check","ship"]]
[{},null,["check","ship"]]'
  expect_eq "the repeated identity kept the first line's context" \
    "$(t show 3 --json | jq -c .context)" '{"n":2}'

  # stdin, a batch step's items per line, a delayed start for all.
  printf '%s\n' '{"context": {"to": ["x@a", "y@a"]}}' '{"context": {"to": [{"key": "z@a", "v": 1}]}}' |
    t submit mail --contexts - --in 1h >"$W/out" 2>"$W/err"
  RC=$?; OUT=$(cat "$W/out"); ERR=$(cat "$W/err")
  expect_rc "--contexts - (stdin) with --in" 0
  expect_eq "mail ids" "$OUT" "5
6"
  expect_eq "each task's batch items from its own line" \
    "$(for id in 5 6; do t show "$id" --json | jq -c '[.steps[0].items.total // .steps[0].items]'; done | tr '\n' ' ')" \
    "$(for n in 2 1; do printf '[%s] ' "$n"; done)"

  # Refusals: the line's number and what was wrong; nothing stored.
  sm_refused "invalid JSON" '{"context": {}}
{"context": }
' "tasker submit: stdin:2: invalid JSON at column 13: unexpected token near '}'; nothing submitted"
  sm_refused "a context that is not an object" '{"context": {"n": 1}}

{"context": [1, 2]}
' "tasker submit: stdin:3: context: expected a JSON object such as {\"order\": 42}, got an array; nothing submitted"
  sm_refused "an unknown member" '{"contxt": {"n": 1}}
' "tasker submit: stdin:1: unknown member \"contxt\": expected \"context\" (the task's context, an object), \"identity\" or \"priority\"; nothing submitted"
  sm_refused "an identity that is not a string" '{}
{"identity": 7}
' "tasker submit: stdin:2: identity: expected a non-empty string (with no NUL); nothing submitted"
  sm_refused "a line that is not an object" '[1]
' "tasker submit: stdin:1: expected an object {\"context\": {...}, \"identity\": \"KEY\", \"priority\": N}; nothing submitted"
  sm_refused "no lines" '

' "tasker submit: stdin: no tasks: expected one JSON object per line, {\"context\": {...}, \"identity\": \"KEY\"}"
  sm_before=$(sm_snapshot)
  printf '%s\n' '{"context": {"to": ["p"]}}' '{"context": {"to": "p"}}' >"$W/bad_mail.jsonl"
  run t submit mail --contexts "$W/bad_mail.jsonl"
  expect_rc "bad batch items: exit 2" 2
  expect_match "bad batch items: the line" "$ERR" "tasker submit: $W/bad_mail.jsonl:2: "
  expect_match "bad batch items: nothing submitted" "$ERR" "; nothing submitted"
  run t submit nosuch --contexts "$W/orders.jsonl"
  expect_rc "unknown template: exit 2" 2
  expect_eq "unknown template: said once, no line" "$ERR" \
    "tasker submit: no template \"nosuch\" (see tasker template list); nothing submitted"
  run t submit order --contexts "$W/missing.jsonl"
  expect_rc "a file that cannot be read: exit 2" 2
  run t submit order --contexts "$W/orders.jsonl" --identity k
  expect_rc "--contexts with --identity: exit 2" 2
  expect_eq "--contexts with --identity: why" "$ERR" \
    "tasker submit: --contexts with --identity: each line gives its task's context and identity"
  expect_eq "refusals stored nothing" "$(sm_snapshot)" "$sm_before"
}

sm_api() {
  serve_start || return 1
  post() { curl -s -o "$W/body" -w '%{http_code}' -X POST -H 'X-Tasker-Request: 1' -d "$1" "$BASE/api/v1/tasks"; }
  expect_eq "POST an array: 201" \
    "$(post '[{"template": "order", "context": {"n": 10}}, {"template": "order", "identity": "b"}, {"template": "order", "identity": "old"}, {"template": "order", "identity": "b"}]')" 201
  expect_eq "ids in order, existed as a single submit says" "$(jq -c . "$W/body")" \
    '{"tasks":[{"id":7,"existed":false},{"id":8,"existed":false},{"id":1,"existed":true},{"id":8,"existed":true}]}'
  expect_eq "POST an array of existing identities: 200" \
    "$(post '[{"template": "order", "identity": "b"}]')" 200
  sa_before=$(sm_snapshot)
  expect_eq "a bad element: 400" \
    "$(post '[{"template": "order"}, {"template": "order", "context": 5}]')" 400
  expect_eq "a bad element: named" "$(jq -c '[.error.code, .error.message, .error.param]' "$W/body")" \
    '["bad_request","body[1]: context: an integer: expected a JSON object","context"]'
  expect_eq "a bad batch list in an element: 400" \
    "$(post '[{"template": "mail", "context": {"to": ["p"]}}, {"template": "mail", "context": {"to": "p"}}]')" 400
  expect_match "a bad batch list in an element: named" "$(jq -r .error.message "$W/body")" "body[1]: "
  expect_eq "an unknown template in an element: 404" \
    "$(post '[{"template": "order"}, {"template": "nosuch"}]')" 404
  expect_match "an unknown template: named" "$(jq -r .error.message "$W/body")" "body[1]: no template"
  expect_eq "an empty array: 400" "$(post '[]')" 400
  expect_eq "refused arrays stored nothing" "$(sm_snapshot)" "$sa_before"
  expect_eq "a single object still works: 201" "$(post '{"template": "order"}')" 201
  expect_eq "its id" "$(jq -c . "$W/body")" '{"id":9,"existed":false}'
  serve_stop
}

# sm_race: 4 bulk submits of the same 300 identities at once (each its own
# process and connection): every one succeeds and prints the same ids, and
# the store holds each identity's task once (on PostgreSQL a submit whose
# identity another session took meanwhile tries again and finds it).
sm_race() {
  i=0
  while [ "$i" -lt 300 ]; do
    printf '{"context": {"i": %d}, "identity": "race-%d"}\n' "$i" "$i"
    i=$((i + 1))
  done >"$W/race.jsonl"
  for k in 1 2 3 4; do
    t submit order --contexts "$W/race.jsonl" >"$W/race$k.out" 2>"$W/race$k.err" &
    eval "race_pid$k=\$!"
  done
  for k in 1 2 3 4; do
    eval "wait \$race_pid$k"
    RC=$?; OUT=""; ERR=$(tail -n 3 "$W/race$k.err")
    expect_rc "concurrent bulk submit $k" 0
  done
  expect_eq "the same ids for all four" "$(cat "$W/race1.out" "$W/race2.out" "$W/race3.out" "$W/race4.out" | sort | uniq -c | awk '{print $1}' | sort -u)" 4
  expect_eq "300 distinct ids" "$(sort -u "$W/race1.out" | wc -l | tr -d ' ')" 300
  expect_eq "each identity stored once" \
    "$(t tasks --json --limit 1000 | jq '[.tasks[] | select(.identity != null and (.identity | startswith("race-")))] | length')" 300
}

sm_run() {
  sm_templates
  run t init
  expect_rc "init" 0
  run t template add "$W/order.toml" "$W/mail.toml"
  expect_rc "template add" 0
  sm_cli
  sm_api
  sm_race
  # Tasks without batch steps go in by groups of rows on SQLite: delayed too.
  printf '{}\n{"context": {"late": true}}\n' | t submit order --contexts - --in 1h >"$W/late.out"
  expect_eq "delayed order tasks submitted" "$(wc -l <"$W/late.out" | tr -d ' ')" 2
  run t run --until-idle --workers 0
  expect_rc "run until idle" 0
  expect_eq "the order tasks ran; the delayed ones wait" \
    "$(t status --json | jq -c .tasks)" '{"complete":307,"pending":4}'
  expect_eq "a delayed task's first step is scheduled" \
    "$(t show "$(tail -n 1 "$W/late.out")" --json | jq -r '.steps[0].why.reason')" scheduled
}
