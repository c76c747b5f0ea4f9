# bench/bench.mk - make bench: times attnrun on the benchmark workloads
# against this machine's sgemm and HDF5 write rates and against numpy.
# Included by the top Makefile, whose variables it uses.
#
#   make bench                              every workload, 5 runs each
#   make bench BENCH_ARGS="--only gpt2,many --runs 3 --no-numpy"
#   make bench BENCH_ARGS="--no-sweep"      without the thread sweep
#   make bench-append                       only the cost of --append as a
#                                           results file grows (also in make bench)
#   make bench-append BENCH_APPEND_ARGS="--layers 12 --runs 3"
#   make bench-view                         only attnrun view: the page written and
#                                           drawn in headless Chromium (also in make bench)
#   make bench-view BENCH_VIEW_ARGS="--only model --runs 5"
#   make bench-flow                         only attnrun flow against scipy's and
#                                           networkx's maximum flows (also in make bench)
#   make bench-flow BENCH_FLOW_ARGS="--only scipy,networkx --runs 5"
#   make bench MPI=1                        only attnrun-mpi's scaling: mpirun
#                                           -n 1 and -n 2, one thread per rank
#   make bench MPI=1 BENCH_MPI_ARGS="--ranks 1,2,4 --runs 5"
#
# The benchmark's own programs always go to build/bench (not $(BUILD)):
# there is one benchmark, whatever attnrun build it times.

BENCH_DIR = build/bench
BENCH_GEN = $(BENCH_DIR)/attnbench-gen
BENCH_RUN = $(BENCH_DIR)/attnbench
BENCH_APPEND = $(BENCH_DIR)/attnbench-append
BENCH_MPI = $(BENCH_DIR)/attnbench-mpi
BENCH_FLOW = $(BENCH_DIR)/attnbench-flow
BENCH_ARGS ?=
BENCH_APPEND_ARGS ?=
BENCH_MPI_ARGS ?=
BENCH_VIEW_ARGS ?=
BENCH_FLOW_ARGS ?=
# The sgemm rate is the machine's: the default (threaded) OpenBLAS, not the
# serial one attnrun links.
BENCH_CPPFLAGS = -D_POSIX_C_SOURCE=200809L -Iinclude/attn -Icmd $(shell pkg-config --cflags $(SERIAL_HDF5_PC) openblas 2>/dev/null)
# Their options are tables, parsed by attnrun's own option code (which
# needs lib/core/names.c of libattn, and nothing else of it).
BENCH_OPTIONS  = cmd/cli/options.c cmd/cli/options.h cmd/cli/exit.h lib/core/names.c
BENCH_LIBS     = $(shell pkg-config --libs $(SERIAL_HDF5_PC) openblas 2>/dev/null) -lm

$(BENCH_GEN): bench/gen.c bench/workloads.h | $(BENCH_DIR)
	$(CC) $(BENCH_CPPFLAGS) $(ALL_CFLAGS) $< $(LDFLAGS) $(BENCH_LIBS) -o $@

$(BENCH_RUN): bench/bench.c bench/clock.h bench/workloads.h $(BENCH_OPTIONS) | $(BENCH_DIR)
	$(CC) $(BENCH_CPPFLAGS) $(ALL_CFLAGS) $< cmd/cli/options.c lib/core/names.c $(LDFLAGS) $(BENCH_LIBS) -o $@

$(BENCH_APPEND): bench/append.c bench/run.h bench/clock.h bench/workloads.h $(BENCH_OPTIONS) | $(BENCH_DIR)
	$(CC) -D_POSIX_C_SOURCE=200809L -Iinclude/attn -Icmd $(ALL_CFLAGS) $< cmd/cli/options.c lib/core/names.c $(LDFLAGS) -o $@

$(BENCH_MPI): bench/mpi.c bench/run.h bench/clock.h bench/workloads.h $(BENCH_OPTIONS) | $(BENCH_DIR)
	$(CC) -D_POSIX_C_SOURCE=200809L -Iinclude/attn -Icmd $(ALL_CFLAGS) $< cmd/cli/options.c lib/core/names.c $(LDFLAGS) -o $@

# attn_flow alone, linked to the library attnrun is built from.
$(BENCH_FLOW): bench/flow_time.c bench/clock.h $(LIB) | $(BENCH_DIR)
	$(CC) -Iinclude/attn $(ALL_CFLAGS) $< $(LIB) $(LDFLAGS) $(LDLIBS) -o $@

$(BENCH_DIR):
	mkdir -p $@

# deps first, then the builds (a recursive make, as `test` does, so that -j
# cannot build before the packages are there).
ifeq ($(MPI),1)
bench: deps
	@$(MAKE) --no-print-directory MPI= all
	@$(MAKE) --no-print-directory $(BIN) $(BENCH_GEN) $(BENCH_MPI)
	$(BENCH_MPI) --attnrun-mpi $(BIN) --attnrun build/attnrun --gen $(BENCH_GEN) $(BENCH_MPI_ARGS)
else
bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_GEN) $(BENCH_RUN) $(BENCH_APPEND) $(BENCH_FLOW)
	$(BENCH_RUN) --attnrun $(BIN) --gen $(BENCH_GEN) --python $(PYTHON) $(BENCH_ARGS)
	$(BENCH_APPEND) --attnrun $(BIN) --gen $(BENCH_GEN) $(BENCH_APPEND_ARGS)
	$(PYTHON) bench/view.py --attnrun $(BIN) --work $(BENCH_DIR)/view $(BENCH_VIEW_ARGS)
	$(PYTHON) bench/flow.py --attnrun $(BIN) --flow-time $(BENCH_FLOW) --work $(BENCH_DIR)/flow $(BENCH_FLOW_ARGS)
endif

.PHONY: bench-append
bench-append: deps
	@$(MAKE) --no-print-directory all $(BENCH_GEN) $(BENCH_APPEND)
	$(BENCH_APPEND) --attnrun $(BIN) --gen $(BENCH_GEN) $(BENCH_APPEND_ARGS)

.PHONY: bench-view
bench-view: deps
	@$(MAKE) --no-print-directory all
	$(PYTHON) bench/view.py --attnrun $(BIN) --work $(BENCH_DIR)/view $(BENCH_VIEW_ARGS)

.PHONY: bench-flow
bench-flow: deps
	@$(MAKE) --no-print-directory all $(BENCH_FLOW)
	$(PYTHON) bench/flow.py --attnrun $(BIN) --flow-time $(BENCH_FLOW) --work $(BENCH_DIR)/flow $(BENCH_FLOW_ARGS)
