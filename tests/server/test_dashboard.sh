#!/bin/sh
# The dashboard in headless Chromium (issue 13): a real store with a task
# whose command step fails twice (once asking for its own delay, once not)
# then succeeds, and one whose step fails permanently with markup in its
# error; one orchestrator run until idle; `tasker serve` on a free loopback
# port; then the pages as Chromium renders them (the DOM after the scripts
# ran): the task page, the failed list, the task list and the overview.
# Decisions and map (issue 21): a task whose decision chose one branch
# (the other skipped, and a step after it), and one whose map's instance
# an operator retried (the map mapped again): the chosen path, the skipped
# nodes, the map's node and its instances page by page.
# Queues (issue 23): the Queues page over a queue the configuration
# limits, and a task's priority and its steps' queue on its page.
# Retry budgets (issue 23): the Budgets page over budget "tight" (2
# retries per 4 s window), whose 4 tasks' steps each failed once.
# Screenshots go to $BUILD/screenshots (or TK_SCREENSHOTS) for people.
# Needs Debian's chromium: without it the test is skipped as requiring
# chromium (a failure when TK_REQUIRE_CHROMIUM=1, as in CI).
. "$(dirname "$0")/../lib/tap.sh"
W=$TMPDIR_TEST
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || tap_skip_all chromium "no chromium (make server-deps installs it)"
command -v python3 >/dev/null 2>&1 ||
  tap_skip_all chromium "no python3, which drives chromium (make server-deps installs it)"
SHOTS=${TK_SCREENSHOTS:-$(cd "$(dirname "$TASKER")/.." && pwd)/screenshots}
mkdir -p "$SHOTS"

t() { "$TASKER" --config "$W/tasker.toml" --db "sqlite:$W/store.db" "$@"; }

# One chromium loads every page (chrome.sh), each in a tab of its own;
# it starts while the store is set up.
. "$(dirname "$0")/../lib/chrome.sh"
chrome_start --headless --no-sandbox --disable-gpu --user-data-dir="$W/chrome" \
  --hide-scrollbars --window-size=1400,1000 --allow-file-access-from-files

# Short delays and no jitter: the run takes about a second.
cat >"$W/tasker.toml" <<'TOML'
[backoff]
base = "150ms"
multiplier = 2.0
jitter = "none"
[backoff.profiles.spread]
base = "1s"
max_delay = "1m"
jitter = "full"
[queues.images]
concurrency = 2
rate = "90/m"
[budgets.tight]
ratio = 0.0
window = "4s"
min_per_second = 0.5
TOML
# transform: attempt 1 asks for 250ms (the server's delay), attempt 2 fails
# plainly (the computed one), attempt 3 succeeds.
cat >"$W/flaky.toml" <<'TOML'
name = "ingest"
version = "1"
description = "fetch, transform (fails twice), load"
[[steps]]
name = "fetch"
handler = { kind = "command", argv = ["sh", "-c", "echo '{\"rows\": 3}'"] }
[[steps]]
name = "transform"
depends_on = ["fetch"]
retry = { max_attempts = 4 }
handler = { kind = "command", argv = ["sh", "-c", """
case $TASKER_ATTEMPT in
1) echo '{"retry_after": "250ms"}'; echo 'HTTP 429 slow down' >&2; exit 75 ;;
2) echo 'connection reset by peer' >&2; exit 1 ;;
esac
echo '{"ok": true}'"""] }
[[steps]]
name = "load"
depends_on = ["transform"]
handler = { kind = "builtin", name = "noop" }
TOML
cat >"$W/broken.toml" <<'TOML'
name = "payment"
version = "1"
[[steps]]
name = "charge"
handler = { kind = "command", argv = ["sh", "-c", "echo '<script>alert(1)</script> card declined' >&2; exit 3"], permanent_exit_codes = [3] }
[[steps]]
name = "receipt"
depends_on = ["charge"]
handler = { kind = "builtin", name = "noop" }
TOML
# setup NAME CMD...: a step the rest needs; the test stops if it fails.
setup() {
  name=$1; shift
  run "$@"
  expect_rc "$name" 0
  [ "$RC" -eq 0 ] || { tap_done; exit 1; }
}
setup "init" t init
setup "template add" t template add "$W/flaky.toml" "$W/broken.toml"
setup "submit ingest" t submit ingest
FLAKY=$OUT
setup "submit payment" t submit payment
BROKEN=$OUT
setup "run until idle" t run --until-idle --workers 2
# The decision's and the map's templates are flow_views.sh's.
. "$(dirname "$0")/../lib/flow_views.sh"
fv_templates
setup "template add order, files" t template add "$W/order.toml" "$W/files.toml"
setup "submit order" t submit order
ORDER=$OUT
setup "submit files" t submit files
FILES=$OUT
setup "run the decision and the map" t run --until-idle --workers 2
# Four tasks whose step fails its first attempt and names budget tight:
# it lets 2 retries go at once and defers the others by up to a window.
cat >"$W/notify.toml" <<'TOML'
name = "notify"
version = "1"
[[steps]]
name = "send"
retry = { budget = "tight" }
handler = { kind = "command", argv = ["sh", "-c", "[ $TASKER_ATTEMPT -gt 1 ]"] }
TOML
setup "template add notify" t template add "$W/notify.toml"
setup "submit 4 notify" t submit notify --count 4
setup "run the notify tasks" t run --until-idle --workers 2
BUDGETS_JSON=$(t budgets --json)
# A task of worker steps (DESIGN §19), submitted after the runs: only a
# worker of its queue takes it, and its page says so.
setup "template add images" t template add "$TK_TOP/examples/workers/images.toml"
setup "submit images" t submit images --context '{"url": "u", "width": 2}' --priority 5
IMAGES=$OUT
# A task whose wait step waits for its signal (DESIGN §18): its page has
# the Signal… action with its JSON box.
setup "template add order_approval" t template add "$TK_TOP/examples/templates/order_approval.toml"
setup "submit order_approval" t submit order_approval --context '{"order": 7}'
APPROVAL=$OUT
setup "run the approval until it waits" t run --until-idle --workers 2
# A parent whose task step waits for its child (DESIGN §18,
# docs/children.md), an order_approval task waiting for its signal: the
# parent's page links the child and the child's page its parent.
cat >"$W/escalate.toml" <<'TOML'
name = "escalate"
version = "1"
[[steps]]
name = "approval"
handler = { kind = "task", template = "order_approval", context = { order = "{{context.order}}" } }
TOML
setup "template add escalate" t template add "$W/escalate.toml"
setup "submit escalate" t submit escalate --context '{"order": 8}'
ESCALATE=$OUT
setup "run escalate until its child waits" t run --until-idle --workers 2
CHILD=$(t show "$ESCALATE" --json | jq '.children[0].id')
expect_eq "escalate started its child, which waits" \
  "$(t show "$CHILD" --json | jq -c '[.state, [.steps[] | select(.state == "waiting") | .name]]')" \
  '["in_progress",["approve"]]'

# serve on a port the kernel picks (serve.sh; flow_views.sh sourced it).
serve_start serve --db "sqlite:$W/store.db" || { tap_done; exit 1; }
URL=$BASE/
tap_ok "serve listens at $URL"

# chrome NAME ROUTE: the page at #ROUTE after its scripts ran, in $DOM
# and $SHOTS/NAME.html, and its screenshot in $SHOTS/NAME.png.
chrome() {
  PAGE=$SHOTS/$1.html
  rm -f "$PAGE" "$SHOTS/$1.png"
  chrome_load "$URL#$2" "$PAGE" "$SHOTS/$1.png" "$W/$1.err" || tap_fail "$1: loaded" "$CHROME_WHY"
  # The page's console: an exception is a bug.
  if grep -q 'Uncaught' "$W/$1.err" 2>/dev/null; then
    tap_fail "$1: no script error" "$(grep 'Uncaught' "$W/$1.err" | head -n 3)"
  else tap_ok "$1: no script error"; fi
  DOM=$(cat "$PAGE" 2>/dev/null)
  if [ -s "$SHOTS/$1.png" ]; then tap_ok "$1: screenshot $SHOTS/$1.png"
  else tap_fail "$1: screenshot $SHOTS/$1.png" "chromium: $(tail -n 5 "$W/chrome.err")"; fi
}

# has NAME TEXT: the page contains the fixed string TEXT.
has() {
  case "$DOM" in
    *"$2"*) tap_ok "$1" ;;
    *) tap_fail "$1" "not in the page ($PAGE): $2" ;;
  esac
}

# count TEXT: how many times the fixed string TEXT occurs in $DOM.
count() { printf '%s' "$DOM" | grep -oF -- "$1" | wc -l | tr -d ' '; }

# expect_count NAME TEXT N
expect_count() {
  n=$(count "$2")
  if [ "$n" -eq "$3" ]; then tap_ok "$1"
  else tap_fail "$1" "\"$2\" occurs $n times in the page ($PAGE), want $3"; fi
}

chrome approval "/task/$APPROVAL"
has "wait step: its state" '<span class="badge st-waiting">'
has "wait step: why says it waits for a signal" '>waiting for signal</span>'
has "wait step: the Signal… action" '>Signal…</button>'
has "wait step: the JSON box" '<textarea class="signal-data"'
has "wait step: send as failure" '>Send as failure</button>'
has "wait step: its node in the DAG" '<g class="node st-waiting"'
expect_count "wait step: its open attempt drawn as waiting on the timeline" \
  'class="attempt oc-waiting"' 1
expect_count "wait step: no attempt drawn as running" 'class="attempt oc-running"' 0
has "wait step: the timeline's legend has waiting" \
  '<span class="swatch sw-oc-waiting"></span>waiting'
has "wait step: its attempt waits in the attempts table" \
  '<span class="oc oc-waiting">waiting for a signal</span>'
expect_count "wait step: no error shown" 'flash-error' 0
chrome parent "/task/$ESCALATE"
has "parent: its children, linked" \
  "<dd class=\"child-tasks\"><a href=\"#/task/$CHILD\""
has "parent: its task step waits for its child" '>waiting for its child task'
has "parent: why links the child" "</span>: <a href=\"#/task/$CHILD\""
has "parent: the open attempt waits for its child in the attempts table" \
  '<span class="oc oc-waiting">waiting for its child task</span>'
expect_count "parent: no error shown" 'flash-error' 0
chrome child "/task/$CHILD"
has "child: its parent, linked" "<dd class=\"parent-task\"><a href=\"#/task/$ESCALATE\""
has "child: the parent's step and attempt" ' step approval attempt 1</dd>'
expect_count "child: no error shown" 'flash-error' 0
chrome worker "/task/$IMAGES"
has "worker step: its why names the queue whose workers take it" \
  '>ready</span>: <span class="muted">waiting for a worker of queue images</span>'
expect_count "worker step: no error shown" 'flash-error' 0
has "task page: the task's priority" '<dt>priority</dt><dd title="among ready steps, those of tasks of higher priority are claimed first">5</dd>'
expect_count "task page: each step's queue, linked to the queues" '<a class="qname" href="#/queues" title="its queue, whose limits its claims obey">images</a>' 2

# The queues (issue 23 item 5): images, limited by the configuration
# ([queues.images], given to the store by the runs above), with fetch
# ready and nothing in progress; the nav links the page.
chrome queues "/queues"
has "queues: the nav links the page" '<a href="#/queues" data-view="queues" class="active">Queues</a>'
has "queues: the images queue, run by workers" '<strong class="mono">images</strong> <span class="qtag" title="outside workers run its steps">workers</span>'
has "queues: fetch ready" '<td class="num">1</td>'
has "queues: none of 2 in progress" '<span class="num">0 / 2</span>'
has "queues: its rate" '<span title="1.5 per second">90/m</span>'
has "queues: its bucket full" '>2 / 2</span>'
has "queues: no worker seen" '<td class="num">0</td>'
expect_count "queues: no error shown" 'flash-error' 0

# The retry budgets (issue 23 item 4): tight's shared state, as
# tasker budgets --json reported it (the deferrals depend on how the
# first attempts fell in the window: the page shows the store's count).
chrome budgets "/budgets"
has "budgets: the nav links the page" '<a href="#/budgets" data-view="budgets" class="active">Budgets</a>'
has "budgets: budget tight" '<strong class="mono">tight</strong>'
has "budgets: its one shared state" '>shared</span>'
has "budgets: its figures" '>0 × firsts + 0.5/s per 4s</span>'
has "budgets: 4 first attempts and 4 retries" '>4 / 4</td>'
has "budgets: the deferred and brought earlier, as tasker budgets says" \
  "<td class=\"num\">$(printf '%s' "$BUDGETS_JSON" | jq .[0].deferred)</td><td class=\"num\">$(printf '%s' "$BUDGETS_JSON" | jq .[0].brought_earlier)</td>"
expect_count "budgets: no error shown" 'flash-error' 0

chrome task "/task/$FLAKY"
has "task page: title" ">Task $FLAKY <span class=\"badge st-complete big\">complete</span>"
for step in fetch transform load; do
  has "task page: step $step in the steps table" "id=\"step-$step\""
done
has "task page: transform took 3 of its 4 attempts" "<td class=\"num\">3/4</td>"
expect_count "task page: 5 attempts drawn on the time axis" 'class="attempt oc-' 5
expect_count "task page: 2 failures drawn" 'class="attempt oc-failure"' 2
expect_count "task page: 3 successes drawn" 'class="attempt oc-success"' 3
expect_count "task page: 2 retry delays drawn" 'class="delay src-' 2
expect_count "task page: the server's delay drawn" 'class="delay src-server"' 1
expect_count "task page: the computed delay drawn" 'class="delay src-computed"' 1
has "task page: the server's delay, 250ms, in the attempts table" \
  '250ms <span class="src-badge src-server"'
has "task page: the computed delay, 300ms (150ms x 2), in the attempts table" \
  '300ms <span class="src-badge src-computed"'
has "task page: the attempt's error as its title" "error: exit status 1: connection reset by peer"
has "task page: the DAG drawn" 'class="dag"'
has "task page: fetch's results" '<h3>fetch</h3><pre class="json">{
  "rows": 3
}</pre>'
expect_count "task page: the DAG's two edges" 'class="edge"' 2
expect_count "task page: no error shown" 'flash-error' 0
expect_count "task page: a complete task offers no cancel" '>Cancel task</button>' 0

chrome decision "/task/$ORDER"
expect_count "decision: the chosen edge emphasized (triage -> review)" 'class="edge chosen"' 1
expect_count "decision: the paths to the skipped steps dashed" 'class="edge not-chosen"' 2
expect_count "decision: two skipped nodes" 'class="node st-skipped' 2
has "decision: the skipped node says why" 'skipped · not chosen by triage'
has "decision: the node after it too" 'skipped · all parents skipped'
has "decision: the decision node says what it chose" 'complete · chose review'
has "decision: the steps table too" '<span class="chosen-list">chose review</span>'
has "decision: the convergence step waits for review" 'waiting for review (error)'
has "decision: the legend has the chosen branch" '>chosen branch<'
has "decision: and the skipped state" '<span class="swatch sw-st-skipped"></span>skipped'
expect_count "decision: no error shown" 'flash-error' 0

# The map in error (its instance f12 failed for good): Retry offered on
# the instance, only Resolve on the map step (retried through its
# instances).
chrome map_failed "/task/$FILES?instances=process&after=9"
has "map in error: the failed instance listed" '<td>process[12]</td><td><span class="badge st-error">error</span>'
expect_count "map in error: Retry on the instance only" '>Retry</button>' 1
expect_count "map in error: Resolve on the instance and the map step" '>Resolve</button>' 2
setup "retry the map's failed instance" t retry "$FILES" 'process[12]'

chrome map "/task/$FILES"
has "map: the map node, mapped" 'class="node st-mapped map"'
has "map: its instances on the node" '24/25 done'
has "map: why in the steps table" 'waiting for 1 of 25 instances (0 failed)'
has "map: the counts above the instances" '25 instances: 24 done, '
expect_count "map: the first 10 instances listed" 'id="instance-process[' 10
has "map: a link to the next page" "href=\"#/task/$FILES?instances=process&amp;after=9\""
expect_count "map: no error shown" 'flash-error' 0

# The pages after the first are read from GET .../instances, 50 at a time:
# the 15 after #9 are the last.
chrome map_page "/task/$FILES?instances=process&after=9"
expect_count "map page 2: the 15 instances after #9" 'id="instance-process[' 15
has "map page 2: starts at #10" 'id="instance-process[10]"'
has "map page 2: ends at #24" 'id="instance-process[24]"'
expect_count "map page 2: not the first page's" 'id="instance-process[9]"' 0
has "map page 2: the retried instance waits for its run" '<td>process[12]</td><td><span class="badge st-waiting_for_retry">waiting for retry</span>'
has "map page 2: the last page" '>last instances<'
has "map page 2: back to the first" '⇤ First instances'

chrome template_flow "/template/default/files?version=1"
has "a map template: its map step drawn as a stack" 'class="node st-none map"'
has "... marked map" '>map</text>'
expect_count "a map template: no error shown" 'flash-error' 0

chrome failed "/failed"
has "failed: the failed step listed" "<strong>charge</strong>"
has "failed: linked to its task" "href=\"#/task/$BROKEN\""
has "failed: a permanent failure, not exhausted" ">permanent failure<"
has "failed: its row has a checkbox" "type=\"checkbox\" aria-label=\"select $BROKEN charge\""
has "failed: markup in the error shown as text" '&lt;script&gt;alert(1)&lt;/script&gt; card declined'
expect_count "failed: no script element from the error" '<script>alert' 0
expect_count "failed: no error shown" 'flash-error' 0

chrome tasks "/tasks"
has "tasks: the flaky task listed" "href=\"#/task/$FLAKY\""
has "tasks: the broken task listed" "href=\"#/task/$BROKEN\""
has "tasks: its error as text" '&lt;script&gt;alert(1)&lt;/script&gt;'
expect_count "tasks: no script element from the error" '<script>alert' 0
has "tasks: the last page" '>last page<'

chrome broken "/task/$BROKEN"
has "broken task: the error as text" '&lt;script&gt;alert(1)&lt;/script&gt; card declined'
expect_count "broken task: no script element from the error" '<script>alert' 0
has "broken task: retry offered for the step in error" '>Retry</button>'
has "broken task: cancel offered for a task in error (tasker cancel's rule)" '>Cancel task</button>'

chrome overview "/"
expect_count "overview: throughput and lateness charts" 'class="chart"' 2
has "overview: the failed step among the latest" "<strong>charge</strong>"
expect_count "overview: no error shown" 'flash-error' 0

chrome backoff "/backoff?profile=spread"
has "backoff: the jitter band's chart" 'class="band"'
has "backoff: the configured profiles offered" '<option value="spread" selected="">spread</option>'
has "backoff: the cap before jitter, 1m, from the 7th retry on" '<td class="num">#7</td><td class="num">1m</td>'
expect_count "backoff: no error shown" 'flash-error' 0

chrome templates "/templates"
has "templates: ingest listed, linked to its page" 'href="#/template/default/ingest?version=1" title="version 1">ingest</a>'
has "templates: payment listed" '>payment</a>'

chrome template "/template/default/ingest?version=1"
has "template: its description" 'fetch, transform (fails twice), load'
has "template: its DAG" 'class="dag"'
has "template: transform's own retry setting" '<td>4 attempts</td>'
has "template: its definition, as JSON" '"name": "transform",'
expect_count "template: no error shown" 'flash-error' 0

# "Retry all matching" sends the failed list's filters and no task state
# (the list shows steps in error of tasks in any state), and "all" only
# when there is no filter: the dashboard's own code, run by chromium on a
# page of its own.
A=$TK_TOP/src/server/assets
cat >"$W/matching.html" <<HTML
<!doctype html><html><body>
<script src="file://$A/dom.js"></script>
<script src="file://$A/views.js"></script>
<script src="file://$A/failed.js"></script>
<script>
document.body.textContent = 'RESULT' + JSON.stringify([TK.matchingBody({}, 1000),
  TK.matchingBody({ template: 'etl', q: 'boom' }, 1000)]) + 'END';
</script></body></html>
HTML
chrome_load "file://$W/matching.html" "$W/matching.out" - "$W/matching.err" ||
  tap_fail "retry all matching: its page loaded" "$CHROME_WHY"
got=$(sed -n 's/.*RESULT\(.*\)END.*/\1/p' "$W/matching.out")
want='[{"filter":{},"max":1000,"all":true},{"filter":{"template":"etl","q":"boom"},"max":1000}]'
if [ "$got" = "$want" ]; then tap_ok "retry all matching: all only without filters, no task state"
else tap_fail "retry all matching: all only without filters, no task state" "got $got, want $want"; fi

chrome_stop
# The server ran the whole test: stopped, it exits 0 (a sanitizer's report
# at exit, a leak or a crash on shutdown, is a non-zero status).
serve_stop

echo "# screenshots: $SHOTS/{approval,parent,child,worker,queues,budgets,task,decision,map_failed,map,map_page,template_flow,failed,tasks,broken,overview,backoff,templates,template}.png"
tap_done
