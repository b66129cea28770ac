# tasker build. `make` builds the library and the CLI; `make test` installs
# missing Debian packages, builds and runs every test; `make demo` runs the
# main job. `make test-asan` runs the suite under ASan+UBSan.

VERSION   := 0.1.0
PREFIX    ?= /usr/local
CC        ?= cc
MODE      ?= release

ifeq ($(MODE),asan)
BUILD     ?= build-asan
OPTFLAGS  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
else
BUILD     ?= build
OPTFLAGS  := -O2 -g
endif

PKGS      := jansson sqlite3 libpq libcurl libmicrohttpd nettle
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN      := -std=c11 -Wall -Wextra -Werror
CPPFLAGS  += -Iinclude -Isrc -D_POSIX_C_SOURCE=200809L -DTK_VERSION='"$(VERSION)"'
CFLAGS    += $(WARN) $(OPTFLAGS) -fPIC -MMD -MP $(PKG_CFLAGS)
LDFLAGS   += $(OPTFLAGS)
LDLIBS    += $(PKG_LIBS) -lm -lpthread

# PG_BACKEND=0 builds without the PostgreSQL backend (and without libpq's
# use at run time: postgres:// URLs are then refused with a clear error).
PG_BACKEND ?= 1
ifeq ($(PG_BACKEND),1)
LIB_SRC   := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
else
LIB_SRC   := $(shell find src -name '*.c' -not -path 'src/cli/*' -not -path 'src/store/postgres/*' | sort)
CPPFLAGS  += -DTK_NO_POSTGRES
endif
CLI_SRC   := $(sort $(wildcard src/cli/*.c))
TEST_SRC  := $(shell find tests -name 'test_*.c' | sort)
TEST_COMMON := $(sort $(wildcard tests/common/*.c))
BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
EXAMPLE_SRC := examples/embed.c

SQLITE_MIGRATIONS := $(sort $(wildcard src/store/sqlite/migrations/*.sql))
PG_MIGRATIONS := $(sort $(wildcard src/store/postgres/migrations/*.sql))
ASSETS    := $(shell find src/server/assets -type f | sort)
API_DOCS  := $(shell find src/server/api_docs -type f | sort)
GEN_SRC   := $(BUILD)/gen/sqlite_migrations.c
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/sqlite_migrations.o \
             $(BUILD)/obj/gen/assets.o $(BUILD)/obj/gen/api_docs.o
ifeq ($(PG_BACKEND),1)
LIB_OBJ   += $(BUILD)/obj/gen/postgres_migrations.o
endif
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_COMMON_OBJ := $(TEST_COMMON:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
EXAMPLE_BIN := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRC))

STATIC_LIB := $(BUILD)/lib/libtasker.a
SHARED_LIB := $(BUILD)/lib/libtasker.so.$(VERSION)
PC_FILE    := $(BUILD)/lib/pkgconfig/tasker.pc
TASKER     := $(BUILD)/bin/tasker

.PHONY: all deps server-deps test test-asan check demo demo-pg bench benches callgrind-compare install install-man clean tests examples fuzz fuzz-smoke
all: $(STATIC_LIB) $(SHARED_LIB) $(PC_FILE) $(TASKER)

deps:
	@scripts/ensure-deps

# What the tests, the PostgreSQL demo and the benchmarks run besides the
# build: a PostgreSQL server (a private cluster each time), libfaketime,
# Debian's chromium, in which the dashboard's test loads the page, mandoc
# and man-db, with which tests/man lints and renders the man pages, jq and
# curl, with which tests/server/api_pg.sh reads the API, clang with its
# libFuzzer runtime, with which `make tests` builds the fuzz targets, and
# nodejs and npm, with which tests/server/openapi.sh installs (npm ci) and
# runs the OpenAPI validator, and python3, whose worker (clients/python)
# tests/clients/python.sh runs, as it runs the Node one (clients/node).
# npm only when there is none: a nodejs that bundles its own npm (not
# Debian's) conflicts with Debian's npm package.
SERVER_DEPS := postgresql faketime chromium mandoc man-db jq curl clang libclang-rt-14-dev nodejs \
  python3
server-deps:
	@TASKER_EXTRA_DEPS="$(SERVER_DEPS)" scripts/ensure-deps
	@command -v npm >/dev/null 2>&1 || TASKER_EXTRA_DEPS=npm scripts/ensure-deps

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# Migrations are compiled in, so the binary needs no files at run time;
# their directory is a prerequisite too, so that removing one regenerates.
$(GEN_SRC): $(SQLITE_MIGRATIONS) src/store/sqlite/migrations scripts/embed-sql
	@mkdir -p $(@D)
	scripts/embed-sql tk__sqlite_migrations $(SQLITE_MIGRATIONS) > $@

$(BUILD)/gen/postgres_migrations.c: $(PG_MIGRATIONS) src/store/postgres/migrations scripts/embed-sql
	@mkdir -p $(@D)
	scripts/embed-sql tk__postgres_migrations $(PG_MIGRATIONS) > $@

# The dashboard's files too (src/server/assets.h); the directory itself is a
# prerequisite so that removing a file regenerates the table.
$(BUILD)/gen/assets.c: $(ASSETS) src/server/assets scripts/embed-assets
	@mkdir -p $(@D)
	scripts/embed-assets src/server/assets $(ASSETS) > $@

# The API's OpenAPI document (docs/api.md "The OpenAPI document"), served
# at /api/v1/openapi.json.
$(BUILD)/gen/api_docs.c: $(API_DOCS) src/server/api_docs scripts/embed-assets
	@mkdir -p $(@D)
	scripts/embed-assets --name tk__api_doc src/server/api_docs $(API_DOCS) > $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(STATIC_LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(SHARED_LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libtasker.so.0 $(LDFLAGS) -o $@ $^ $(LDLIBS)
	ln -sf libtasker.so.$(VERSION) $(BUILD)/lib/libtasker.so.0
	ln -sf libtasker.so.$(VERSION) $(BUILD)/lib/libtasker.so

$(PC_FILE): tasker.pc.in Makefile
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(PKGS)|' $< > $@

$(TASKER): $(CLI_OBJ) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(STATIC_LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_COMMON_OBJ) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_COMMON_OBJ) $(STATIC_LIB) -lcmocka $(LDLIBS)

# Tools bench_pg.sh runs (not benchmarks of their own).
BENCH_TOOLS := $(BUILD)/bench/claim_timer $(BUILD)/bench/submit_paced
$(BENCH_TOOLS): $(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LDLIBS)

# bench_http answers its requests with the tests' loopback server.
$(BUILD)/bench/bench_http: bench/bench_http.c $(BUILD)/obj/tests/common/http_stub.o $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/common/http_stub.o \
	  $(STATIC_LIB) $(LDLIBS)

# The examples build against the installed-style public headers only.
$(BUILD)/examples/%: examples/%.c $(STATIC_LIB)
	@mkdir -p $(@D)
	$(CC) -Iinclude $(WARN) $(OPTFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LDLIBS)

examples: $(EXAMPLE_BIN)

# The fuzz targets too (clang; build-fuzz/ whatever MODE), so that they
# cannot rot unseen.
tests: $(TEST_BIN) $(TASKER) $(EXAMPLE_BIN) fuzz

# Build and run every unit and integration test; last line "N passed, N failed".
# The build of the tests runs on every core: on a fresh clone it was a
# third of `make test`.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

test: server-deps
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) tests
	@BUILD=$(BUILD) scripts/run-tests

test-asan: server-deps
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) MODE=asan tests
	@BUILD=build-asan ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 scripts/run-tests

demo: deps
	@$(MAKE) --no-print-directory $(TASKER)
	@TASKER=$(TASKER) scripts/demo

# The demo across processes: a private PostgreSQL cluster, three orchestrators.
demo-pg: server-deps
	@$(MAKE) --no-print-directory $(TASKER)
	@TASKER=$(TASKER) scripts/demo-pg

# The benchmark programs and the tools bench_pg.sh runs, built, not run.
benches: $(BENCH_BIN) $(BENCH_TOOLS)

bench: server-deps
	@$(MAKE) --no-print-directory benches $(TASKER)
	@BUILD=$(BUILD) bench/run

# The hot path's instructions (bench_engine throughput under callgrind)
# here against revision BASE, e.g. `make callgrind-compare BASE=9573808`.
callgrind-compare:
	@test -n "$(BASE)" || { echo "usage: make callgrind-compare BASE=REV" >&2; exit 2; }
	@TASKER_EXTRA_DEPS=valgrind scripts/ensure-deps
	@sh bench/callgrind_compare.sh $(BASE)

install: all install-man
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/tasker $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/tasker/*.h $(DESTDIR)$(PREFIX)/include/tasker/
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtasker.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtasker.so.0
	ln -sf libtasker.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtasker.so
	install -m 644 $(PC_FILE) $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 755 $(TASKER) $(DESTDIR)$(PREFIX)/bin/

# The man pages are written by hand in mdoc (man/); tests/man/man_pages.sh
# lints them and checks them against the binary's commands, flags and keys.
MAN_DIR := $(DESTDIR)$(PREFIX)/share/man
install-man:
	install -d $(MAN_DIR)/man1 $(MAN_DIR)/man5
	install -m 644 man/tasker.1 $(MAN_DIR)/man1/
	install -m 644 man/tasker.toml.5 $(MAN_DIR)/man5/

clean:
	rm -rf build build-asan build-fuzz build-nopg

# Fuzzing with clang's libFuzzer. `make fuzz` builds build-fuzz/fuzz_NAME
# for each target in fuzz/ from the sources it needs directly (not the gcc
# objects); `make fuzz-smoke` runs the TOML one for $(FUZZ_TIME) seconds on
# the toml-test valid documents, and each other one for $(FUZZ_TIME_EACH)
# seconds on its seeds in fuzz/seeds/NAME (copied: the corpus grows in a
# temporary directory).
FUZZ_CC       ?= clang
FUZZ_TIME     ?= 40
FUZZ_TIME_EACH ?= 20
TOML_TEST_DIR ?= ../shared/toml-test
FUZZ_TARGETS  := toml retry_after placeholder command_stdout api flow worker
FUZZ_BINS     := $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)
FUZZ_FLAGS     = $(CPPFLAGS) $(WARN) -g -O1 -fsanitize=fuzzer,address,undefined \
                 -fno-sanitize-recover=all $(PKG_CFLAGS)
FUZZ_SRC_toml := $(sort $(wildcard src/toml/*.c)) src/core/error.c src/core/civil.c
FUZZ_SRC_retry_after := src/backoff/retry_after.c src/core/civil.c src/core/error.c
FUZZ_SRC_placeholder := src/handlers/placeholder.c src/core/buf.c src/core/error.c
# The command handler's file brings what its spec reading uses. clang reads
# TK__CFIELD(obj, k, const char *) in the configuration as a duplicate const
# (gcc does not), hence the one warning turned off for this target.
FUZZ_SRC_command_stdout := src/handlers/command.c src/handlers/builtin.c \
  src/handlers/builtin_choose.c src/handlers/placeholder.c \
  $(sort $(wildcard src/config/*.c src/toml/*.c src/core/*.c src/backoff/*.c)) src/retry/budget.c \
  src/schedule/def.c src/schedule/cron.c src/schedule/tz.c src/handlers/queue_name.c
FUZZ_EXTRA_command_stdout := -Wno-duplicate-decl-specifier
# The API's request parsing (routes, query strings, bodies; the signal body's
# rule in store/rules.c), apart from HTTP.
FUZZ_SRC_api := src/server/route.c src/handlers/queue_name.c src/server/query_parse.c src/server/body_parse.c \
  src/server/api_error.c src/server/listen.c src/store/rules.c src/core/error.c \
  src/core/duration.c
# The worker protocol's bodies and paths (docs/api.md "Workers").
FUZZ_SRC_worker := src/server/route.c src/handlers/queue_name.c src/server/query_parse.c src/server/body_parse.c \
  src/server/worker_body.c src/server/api_error.c src/core/error.c src/core/duration.c
# The decision and map rules (store/flow.c) over handler results.
FUZZ_SRC_flow := src/store/flow.c src/core/error.c
build-fuzz/fuzz_flow: tests/common/flow_fixture.h

fuzz: $(FUZZ_BINS)

# One rule per target: its sources and headers.
define FUZZ_RULE
build-fuzz/fuzz_$(1): fuzz/fuzz_$(1).c $$(FUZZ_SRC_$(1)) $$(wildcard fuzz/*.h src/*/*.h include/tasker/*.h)
	@command -v $$(FUZZ_CC) >/dev/null 2>&1 || TASKER_EXTRA_DEPS="clang libclang-rt-14-dev" scripts/ensure-deps || \
	  { echo "fuzz: $$(FUZZ_CC) not found; run: sudo apt-get install -y clang libclang-rt-14-dev" >&2; exit 1; }
	@mkdir -p $$(@D)
	$$(FUZZ_CC) $$(FUZZ_FLAGS) $$(FUZZ_EXTRA_$(1)) -o $$@ fuzz/fuzz_$(1).c $$(FUZZ_SRC_$(1)) $$(PKG_LIBS) -lm -lpthread
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call FUZZ_RULE,$(t))))

fuzz-smoke: fuzz
	@test -d "$(TOML_TEST_DIR)/tests/valid" || \
	  { echo "fuzz-smoke: no seeds in $(TOML_TEST_DIR)/tests/valid (set TOML_TEST_DIR)" >&2; exit 1; }
	@corpus=$$(mktemp -d) && trap 'rm -rf "$$corpus"' EXIT && i=0 && \
	  for f in $$(find "$(TOML_TEST_DIR)/tests/valid" -name '*.toml'); do \
	    i=$$((i + 1)); cp "$$f" "$$corpus/seed$$i.toml"; done && \
	  echo "fuzz-smoke: toml: $$i seeds, $(FUZZ_TIME) s" && \
	  ./build-fuzz/fuzz_toml -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=build-fuzz/ -dict=fuzz/toml.dict -print_final_stats=1 "$$corpus"
	@for t in $(filter-out toml,$(FUZZ_TARGETS)); do \
	  corpus=$$(mktemp -d) && cp fuzz/seeds/$$t/* "$$corpus/" && \
	  echo "fuzz-smoke: $$t: $$(ls "$$corpus" | wc -l) seeds, $(FUZZ_TIME_EACH) s" && \
	  ./build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME_EACH) -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=build-fuzz/$$t- -dict=fuzz/$$t.dict -print_final_stats=1 "$$corpus" \
	    || { rm -rf "$$corpus"; exit 1; }; \
	  rm -rf "$$corpus"; \
	done

# The tests' and the benchmarks' dependency files too: a test program
# rebuilds when a header it includes (tests/store/conformance_*.h) changes.
-include $(shell find $(BUILD)/obj $(BUILD)/tests $(BUILD)/bench -name '*.d' 2>/dev/null)

# The tests' shared objects are kept, not rebuilt by every make.
.SECONDARY: $(TEST_COMMON_OBJ)
