# attnrun - see README.md.  make | make test | make test-quick | make demo | make install | make clean
#
#   WERROR=1                    warnings are errors (CI)
#   SANITIZE=address,undefined  build with sanitizers (into build/sanitize)
#   MPI=1                       build/attnrun-mpi, for mpirun: parallel HDF5
#                               (OpenMPI's), mpicc; `make MPI=1 test` runs
#                               the MPI suite, `make MPI=1 bench` its scaling

CC       ?= cc
comma    := ,
PREFIX   ?= /usr/local
PYTHON   ?= /usr/bin/python3
WARNINGS  = -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS   ?= -O2 -g

# attnrun runs its own OpenMP threads, each calling BLAS on one block, so it
# links Debian's OpenMP build of OpenBLAS (libopenblas-openmp-dev), by its
# rpath: inside an OpenMP parallel region it runs single-threaded and is
# safe to call from every thread at once, with no thread pool of its own.
# (The default pthread build would start a pool that only spins; the serial
# build is not safe to call from several threads.)  Without the OpenMP
# build, the default OpenBLAS is used.
MULTIARCH   := $(shell $(CC) -print-multiarch 2>/dev/null)
OPENMP_PC    = /usr/lib/$(MULTIARCH)/openblas-openmp/pkgconfig
BLAS_PC     := $(if $(wildcard $(OPENMP_PC)/openblas.pc),PKG_CONFIG_PATH=$(OPENMP_PC) )
BLAS_CFLAGS := $(shell $(BLAS_PC)pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell $(BLAS_PC)pkg-config --libs openblas 2>/dev/null)
BLAS_LIBS   += $(if $(BLAS_PC),-Wl$(comma)-rpath$(comma)$(shell $(BLAS_PC)pkg-config --variable=libdir openblas))
ifeq ($(BLAS_PC),)
$(warning libopenblas-openmp-dev not found: linking the default OpenBLAS (a sequential one runs attnrun on one thread))
endif

# HDF5: Debian's serial flavour by name (hdf5.pc points at the MPI one once
# libhdf5-openmpi-dev is installed), or OpenMPI's with MPI=1.
SERIAL_HDF5_PC := $(if $(shell pkg-config --exists hdf5-serial 2>/dev/null && echo yes),hdf5-serial,hdf5)
ifeq ($(MPI),1)
HDF5_PC   = hdf5-openmpi
CC        = mpicc
CPPFLAGS += -DATTN_MPI
else ifneq ($(MPI),)
$(error MPI must be 1 or empty, not '$(MPI)')
else
HDF5_PC   = $(SERIAL_HDF5_PC)
endif

# Headers: the public ones (include/attn/, installed), then lib/'s own,
# named by their layer's folder ("h5/h5.h"); cmd/ sees include/attn/ and cmd/.
CPPFLAGS += -D_POSIX_C_SOURCE=200809L $(shell pkg-config --cflags $(HDF5_PC) 2>/dev/null) $(BLAS_CFLAGS)
LIB_CPPFLAGS = -Iinclude/attn -Ilib
CMD_CPPFLAGS = -Iinclude/attn -Icmd
# Each object also writes its header dependencies (-MMD), with an empty
# rule per header (-MP) so that a removed header breaks nothing.
DEPFLAGS   = -MMD -MP
ALL_CFLAGS = -std=c11 -fopenmp -fno-math-errno $(WARNINGS) $(CFLAGS)
LDFLAGS  += -fopenmp
LDLIBS   += -lhdf5_hl $(shell pkg-config --libs $(HDF5_PC) 2>/dev/null) $(BLAS_LIBS) -ldeflate -lm

BUILD    = build$(if $(MPI),/mpi)
ifeq ($(WERROR),1)
ALL_CFLAGS += -Werror
else ifneq ($(WERROR),)
$(error WERROR must be 1 or empty, not '$(WERROR)')
endif
ifneq ($(SANITIZE),)
ifneq ($(filter-out address undefined,$(subst $(comma), ,$(SANITIZE))),)
$(error SANITIZE takes address and/or undefined, comma separated, not '$(SANITIZE)')
endif
BUILD     = build$(if $(MPI),/mpi)/sanitize
# HDF5's allocations of absurd sizes (damaged files) fail as they would
# without ASan, and its own error-path leaks are not attnrun's.
# Under MPI=1 no leak check: OpenMPI's components, unloaded at
# MPI_Finalize, leave allocations LeakSanitizer cannot name to suppress;
# the same library code is leak-checked in the serial build.
export ASAN_OPTIONS ?= allocator_may_return_null=1$(if $(MPI),:detect_leaks=0)
export ATTN_TEST_SANITIZED = 1
export LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/lib/lsan.supp:print_suppressions=0
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS   += -fsanitize=$(SANITIZE)
endif

LIB_SRC  = $(wildcard lib/*/*.c)
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      = $(BUILD)/libattn.a
BIN      = $(BUILD)/attnrun
ifeq ($(MPI)$(SANITIZE),1)
BIN      = build/attnrun-mpi
else ifeq ($(MPI),1)
BIN      = $(BUILD)/attnrun-mpi
endif
CMD_SRC  = cmd/main.c $(wildcard cmd/*/*.c)
CMD_OBJ  = $(CMD_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC = $(wildcard tests/unit/test_*.c)
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all deps demo test test-quick check unit cli install clean bench fuzz memcheck
.PHONY: pictures mutate
all: $(BIN)

$(BUILD)/lib/%.o: lib/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

# Made afresh, so that the objects of removed sources do not linger in it.
$(LIB): $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# attnrun plot draws with cairo (libcairo2-dev); only the command line uses it.
CAIRO_CFLAGS := $(shell pkg-config --cflags cairo 2>/dev/null)
CAIRO_LIBS   := $(shell pkg-config --libs cairo 2>/dev/null)

$(BUILD)/cmd/%.o: cmd/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CMD_CPPFLAGS) $(CAIRO_CFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BIN): $(CMD_OBJ) $(LIB)
	$(CC) $(CMD_OBJ) $(LIB) $(LDFLAGS) $(LDLIBS) $(CAIRO_LIBS) -o $@

# A unit test compiles apart from its link, so that a change to lib/ (an
# edit, or a mutant of make mutate) relinks the tests without compiling them.
$(BUILD)/tests/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CPPFLAGS) -Itests/unit $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

# Kept, not removed as an intermediate file once the test is linked.
.PRECIOUS: $(BUILD)/tests/%.o
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB)
	$(CC) $< $(LIB) $(LDFLAGS) $(LDLIBS) -lcmocka -o $@

# The command line's option code is libc only (bench/ builds it alone), and
# so is its unit test: cmd/cli/options.c without libattn (with the one file
# of it that the option code uses, lib/core/names.c).
$(BUILD)/tests/test_nearest: tests/unit/test_nearest.c cmd/cli/options.c cmd/cli/options.h cmd/cli/exit.h lib/core/names.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Iinclude/attn -Icmd $(ALL_CFLAGS) $< cmd/cli/options.c lib/core/names.c $(LDFLAGS) -lcmocka -o $@

# Installs the Debian packages the build and the tests need (as root), or
# prints the apt-get line to run.
deps:
	@sh scripts/install-deps.sh $(if $(MPI),mpi)

# The toy example (README): each command shown before it runs, the results
# left in $(BUILD)/demo/toy.out.h5.
demo: deps
	@$(MAKE) --no-print-directory all
	@sh scripts/demo.sh $(BIN) $(BUILD)/demo

# README's pictures (docs/images/), drawn by attnrun plot.
pictures: $(BIN)
	@sh scripts/make-pictures.sh $(BIN)

# The allocation-failure build: the Nth allocation fails (ATTN_FAIL_ALLOC=N),
# with ASan to catch leaks and bad accesses on every failure path, and
# UBSan's checks as traps (SIGILL, which attnrun's fatal-signal handler
# reports as an internal error, a failure of the sweep): UBSan's runtime
# library holds 6 MB of globals that LeakSanitizer scans at the end of
# every run of a sweep, a third of a run's time.
FAULT_DIR   = build$(if $(MPI),/mpi)/fault
FAULT_BIN   = $(FAULT_DIR)/attnrun
FAULT_FLAGS = -DATTN_FAULT_INJECTION -fsanitize=address,undefined -fsanitize-undefined-trap-on-error \
              -fno-sanitize-recover=all -fno-omit-frame-pointer
FAULT_OBJ   = $(LIB_SRC:%.c=$(FAULT_DIR)/%.o) $(CMD_SRC:%.c=$(FAULT_DIR)/%.o)

# (the flags themselves, rewritten when they change: the objects follow)
$(FAULT_DIR)/flags: FORCE
	@mkdir -p $(@D)
	@echo '$(FAULT_FLAGS)' | cmp -s - $@ || echo '$(FAULT_FLAGS)' >$@

$(FAULT_DIR)/lib/%.o: lib/%.c $(FAULT_DIR)/flags
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(FAULT_FLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(FAULT_DIR)/cmd/%.o: cmd/%.c $(FAULT_DIR)/flags
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CMD_CPPFLAGS) $(CAIRO_CFLAGS) $(FAULT_FLAGS) $(ALL_CFLAGS) $(DEPFLAGS) \
	    -c $< -o $@

$(FAULT_BIN): $(FAULT_OBJ)
	$(CC) $(FAULT_OBJ) $(LDFLAGS) -fsanitize=address $(LDLIBS) $(CAIRO_LIBS) -o $@

# attnrun view's page: its template, style and script are files of
# cmd/view/page/, embedded by cmd/view/assets.c (.incbin) in every build,
# with the hashes of the style and script that the page's
# Content-Security-Policy allows, computed here from the same files.
VIEW_PAGE   = cmd/view/page/view.html cmd/view/page/view.css cmd/view/page/view.js
VIEW_HASHES = -DVIEW_CSS_SHA256='"$(shell sh scripts/page-hashes.sh cmd/view/page/view.css)"' \
              -DVIEW_JS_SHA256='"$(shell sh scripts/page-hashes.sh cmd/view/page/view.js)"'
$(BUILD)/cmd/view/assets.o $(FAULT_DIR)/cmd/view/assets.o: $(VIEW_PAGE) scripts/page-hashes.sh
$(BUILD)/cmd/view/assets.o $(FAULT_DIR)/cmd/view/assets.o: CMD_CPPFLAGS += $(VIEW_HASHES)

# The command-line suites (tests/README.md), roughly the slowest first: on
# a fresh clone the runner starts them in this order, then in the order of
# the times it last measured (build/test-logs/times).
CLI_TESTS = tests/cli/test_readers.sh tests/cli/test_runtime.sh tests/cli/test_cli.sh \
            tests/cli/test_memory.sh tests/cli/test_summaries.sh tests/cli/test_bad.sh \
            tests/cli/test_errors.sh tests/cli/test_plot.sh tests/cli/test_view.sh \
            tests/cli/test_doc_commands.sh \
            tests/cli/test_startup.sh tests/cli/test_blocks.sh tests/cli/test_rollout.sh tests/cli/test_flow.sh \
            tests/cli/test_sliding.sh tests/cli/test_progress.sh tests/cli/test_store.sh \
            tests/cli/test_models.sh tests/cli/test_compare.sh tests/cli/test_h5files.sh \
            tests/cli/test_tokens.sh tests/cli/test_append.sh tests/cli/test_alloc.sh \
            tests/cli/test_norms.sh tests/cli/test_warnings.sh tests/cli/test_docs.sh \
            tests/cli/test_heads.sh tests/cli/test_options.sh tests/cli/test_install.sh \
            tests/cli/test_fast.sh tests/cli/test_sysfail.sh tests/cli/test_fixtures.sh \
            tests/cli/test_json.sh tests/cli/test_smoke.sh tests/cli/test_expect.sh

# The source tree's layers (tests/lib/layers.py): no file includes a header
# of a higher layer, and the command line only public ones.
SOURCE_TESTS = tests/lib/layers.py

# The runner (tests/lib/runner.py): JOBS suites side by side (default: the
# cores), the serial ones alone; SUITES=test_bad,test_cli runs only those.
# One line per suite as it ends, a failing suite's whole log, the slowest
# five and "suites: N passed, M failed"; the logs in $(BUILD)/test-logs/.
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
SUITES ?=
RUNNER  = PYTHON=$(PYTHON) $(PYTHON) tests/lib/runner.py --jobs $(JOBS) --logs $(BUILD)/test-logs \
          $(if $(SUITES),--only $(SUITES))

ifeq ($(MPI),1)
unit cli test-quick:
	@echo "make $@ runs the serial build's suites; with MPI=1, make test runs the MPI suite" >&2
	@exit 2
else
unit: $(UNIT_BIN)
	@$(RUNNER) $(UNIT_BIN)

cli: $(BIN) $(FAULT_BIN)
	@ATTNRUN=$(BIN) FAULT_ATTNRUN=$(FAULT_BIN) $(RUNNER) $(CLI_TESTS)
endif

ifeq ($(MPI),1)
# The MPI suite: attnrun-mpi under mpirun against the serial build's files;
# and the warnings, given once by an MPI job.
MPI_TESTS = tests/cli/test_mpi.sh tests/cli/test_warnings.sh tests/cli/test_expect.sh
test: deps
	@$(MAKE) --no-print-directory MPI= SANITIZE=$(SANITIZE) all
	@$(MAKE) --no-print-directory $(BIN)
	@ATTNRUN=build$(if $(SANITIZE),/sanitize)/attnrun ATTNRUN_MPI=$(BIN) $(RUNNER) $(MPI_TESTS)
else
# (test_install's make install SANITIZE= finds the plain build's shared
# library made here, with the other JOBS, rather than compile it alone)
INSTALL_BUILT = build/attnrun build/libattn.a build/libattn.so.$(VERSION)

test: deps
	@$(MAKE) --no-print-directory -s -j$(JOBS) all $(UNIT_BIN) $(FAULT_BIN)
	@$(MAKE) --no-print-directory -s -j$(JOBS) SANITIZE= $(INSTALL_BUILT)
	@ATTNRUN=$(BIN) FAULT_ATTNRUN=$(FAULT_BIN) $(RUNNER) $(SOURCE_TESTS) $(UNIT_BIN) $(CLI_TESTS)

# make test-quick: the edit loop's tier, about 30 s -- every cmocka test,
# test_smoke.sh (every subcommand once) and each suite's first, fastest
# checks (ATTN_TEST_TIER=quick, tests/lib/checks.sh).  Not the full suite.
test-quick: deps
	@$(MAKE) --no-print-directory -s -j$(JOBS) all $(UNIT_BIN) $(FAULT_BIN)
	@$(MAKE) --no-print-directory -s -j$(JOBS) SANITIZE= $(INSTALL_BUILT)
	@ATTNRUN=$(BIN) FAULT_ATTNRUN=$(FAULT_BIN) $(RUNNER) --tier quick \
	    $(SOURCE_TESTS) $(UNIT_BIN) $(CLI_TESTS)
endif

check: test

# make mutate [MUTANTS=N] [SEED=S] [MUTATE_FILES=lib/math/,lib/plan/]: single
# mutations of lib/, each rebuilt and judged by the cmocka tests and the
# suites tests/mutate/suites names for its file, in scratch copies under
# build/mutate/ (tests/mutate/mutate.py, tests/README.md).  MUTANTS=0 (the
# default) runs every mutant; exits 1 when one survives that
# tests/mutate/equivalent does not list.  BASELINE=quick: the unmutated
# build must pass the quick tier only, for a run that follows a passing
# `make test` of the same sources (CI).
MUTANTS      ?= 0
SEED         ?= 23
MUTATE_FILES ?=
MUTATE_JOBS  ?= 2
BASELINE     ?=
mutate: deps
	@$(PYTHON) tests/mutate/mutate.py --mutants $(MUTANTS) --seed $(SEED) --jobs $(MUTATE_JOBS) \
	    $(if $(MUTATE_FILES),--files $(MUTATE_FILES)) $(if $(BASELINE),--baseline $(BASELINE))

# make fuzz FUZZ_SECONDS=N: libFuzzer (clang) over the input path, see
# tests/fuzz/fuzz_input.c.  Findings land in build/fuzz/findings/;
# FUZZ_ARGS="-fork=2 -ignore_crashes=1" keeps going after one.
FUZZ_SECONDS ?= 60
FUZZ_ARGS    ?=
FUZZ_DIR      = build$(if $(MPI),/mpi)/fuzz
FUZZ_BIN      = $(FUZZ_DIR)/fuzz_input
FUZZ_FLAGS    = -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
                -Wno-source-uses-openmp
# one options byte (see tests/fuzz/fuzz_input.c) before each fixture's bytes
FUZZ_SEEDS    = 000 044 011 003 140 240

$(FUZZ_BIN): tests/fuzz/fuzz_input.c $(LIB_SRC) $(wildcard include/attn/*.h lib/*/*.h lib/*/*.inc)
	@mkdir -p $(FUZZ_DIR)
	clang $(CPPFLAGS) $(LIB_CPPFLAGS) $(FUZZ_FLAGS) tests/fuzz/fuzz_input.c $(LIB_SRC) \
	    -lhdf5_hl $(shell pkg-config --libs $(HDF5_PC) 2>/dev/null) $(BLAS_LIBS) -ldeflate -lm -o $@

fuzz:
	@sh scripts/install-deps.sh fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/findings
	@for f in fixtures/*.h5; do case $$f in *.expected.h5) continue ;; esac; \
	    for b in $(FUZZ_SEEDS); do \
	        { printf "\\$$b"; cat "$$f"; } > $(FUZZ_DIR)/corpus/seed-$$b-$$(basename $$f); \
	    done; done
	ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 $(FUZZ_BIN) \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=20 -malloc_limit_mb=1000000 \
	    -rss_limit_mb=4096 -artifact_prefix=$(FUZZ_DIR)/findings/ -print_final_stats=1 \
	    $(FUZZ_ARGS) $(FUZZ_DIR)/corpus

# make memcheck: the command-line suites under valgrind (tests/lib/valgrind-attnrun):
# no memory error and no definite leak in any run.  test_cli.sh and
# test_runtime.sh are left out: their signal, lock and resource-limit checks
# do not hold at valgrind's speed (or under its own memory); so are the
# fuzz inputs on which HDF5 itself crashes (valgrind reports HDF5's invalid
# access first; the other builds check that attnrun ends cleanly on them).
MEMCHECK_TESTS = tests/cli/test_fixtures.sh tests/cli/test_errors.sh tests/cli/test_fast.sh tests/cli/test_bad.sh \
                 tests/cli/test_h5files.sh tests/cli/test_store.sh

memcheck:
	@sh scripts/install-deps.sh memcheck
	@$(MAKE) --no-print-directory all
	@ATTNRUN=$(CURDIR)/tests/lib/valgrind-attnrun ATTNRUN_BINARY=$(CURDIR)/$(BIN) TIME_LIMIT=120 \
	    SWEEP_EVERY=8 SKIP_HDF5_CRASHES=1 $(RUNNER) $(MEMCHECK_TESTS)

# make install PREFIX=/usr/local DESTDIR=: the program, both libraries, the
# public headers (include/attn/), attn.pc and the man page.  The shared
# library is built from position-independent objects of its own
# (build/pic/); it exports only the attn_* names (lib/libattn.map) and
# carries its dependencies, the OpenMP OpenBLAS's rpath included, so that
# `cc prog.c $(pkg-config --cflags --libs attn)` needs nothing else.
# Its soname changes with the major version of ATTN_VERSION.
VERSION       := $(shell sed -n 's/^.define ATTN_VERSION "\([0-9]*\.[0-9]*\.[0-9]*\)"$$/\1/p' include/attn/attn_common.h)
ifneq ($(words $(subst ., ,$(VERSION))),3)
$(error include/attn/attn_common.h: no ATTN_VERSION "MAJOR.MINOR.PATCH" found)
endif
VERSION_MAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME         = libattn.so.$(VERSION_MAJOR)
SHLIB          = $(BUILD)/libattn.so.$(VERSION)
PIC_OBJ        = $(LIB_SRC:lib/%.c=$(BUILD)/pic/%.o)
PUBLIC_HEADERS = $(wildcard include/attn/*.h)
BINDIR        ?= $(PREFIX)/bin
LIBDIR        ?= $(PREFIX)/lib
INCLUDEDIR    ?= $(PREFIX)/include
MANDIR        ?= $(PREFIX)/share/man
PKGCONFIGDIR  ?= $(LIBDIR)/pkgconfig

.PHONY: lib uninstall
lib: $(LIB) $(SHLIB)

$(BUILD)/pic/%.o: lib/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CPPFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -fPIC -c $< -o $@

$(SHLIB): $(PIC_OBJ) lib/libattn.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=lib/libattn.map -Wl,-z,defs \
	    $(PIC_OBJ) $(LDFLAGS) $(LDLIBS) -o $@

# attn.pc for the paths of this install, written relative to ${prefix}
# where they are under PREFIX (so pkg-config --define-prefix can move the
# tree).  Libs.private names the libraries libattn links, for a static
# link, by the very flags the build used: the OpenMP OpenBLAS's own .pc is
# not on pkg-config's path, so Requires.private could not name it.
under_prefix = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
$(BUILD)/attn.pc: lib/attn.pc.in include/attn/attn_common.h Makefile FORCE
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(call under_prefix,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(call under_prefix,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(VERSION)|; s|@LIBS_PRIVATE@|$(strip $(LDFLAGS) $(LDLIBS))|' \
	    lib/attn.pc.in > $@

FORCE:

ifeq ($(MPI),1)
# make MPI=1 install: the MPI program only, beside attnrun (the library,
# headers and man page are the default build's).
install: $(BIN)
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/attnrun-mpi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/attnrun-mpi
else
install: $(BIN) $(LIB) $(SHLIB) $(BUILD)/attn.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	    $(DESTDIR)$(INCLUDEDIR)/attn $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/attnrun
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libattn.a
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/libattn.so.$(VERSION)
	ln -sf libattn.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libattn.so
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/attn/
	install -m 644 $(BUILD)/attn.pc $(DESTDIR)$(PKGCONFIGDIR)/attn.pc
	install -m 644 man/attnrun.1 $(DESTDIR)$(MANDIR)/man1/attnrun.1

# Removes what install put, and include/attn/ when that leaves it empty.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/attnrun $(DESTDIR)$(LIBDIR)/libattn.a \
	    $(DESTDIR)$(LIBDIR)/libattn.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libattn.so $(DESTDIR)$(PKGCONFIGDIR)/attn.pc \
	    $(DESTDIR)$(MANDIR)/man1/attnrun.1 \
	    $(addprefix $(DESTDIR)$(INCLUDEDIR)/attn/,$(notdir $(PUBLIC_HEADERS)))
	[ ! -d $(DESTDIR)$(INCLUDEDIR)/attn ] || rmdir $(DESTDIR)$(INCLUDEDIR)/attn 2>/dev/null || true
endif

clean:
	rm -rf build

# The header dependencies every object wrote (-MMD).
-include $(LIB_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(PIC_OBJ:.o=.d) $(FAULT_OBJ:.o=.d) $(UNIT_BIN:=.d)

# make bench: the benchmark of bench/ (see README.md, Performance).
include bench/bench.mk
