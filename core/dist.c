// defines: dist_init, dist_finalize, dist_rank, dist_world, dist_local_rank, dist_engine,
//          dist_sum_f32, dist_sum_f64, dist_sum_f32_device, dist_block, dist_reduce_scatter_f32,
//          dist_allgather_f32, dist_gather_f32, dist_reduce_scatter_f32_device, dist_allgather_f32_device,
//          dist_any, dist_bcast, dist_barrier, dist_abort, dist_set_device_ops
#include "core/dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

// The GPU collectives, registered by a front end that links them (core/dist.h); NULL: none.
static const DistDeviceOps *g_dev;
void dist_set_device_ops(const DistDeviceOps *ops) { g_dev = ops; }

// What a launcher tells each process about the job's size (Open MPI's mpirun, MPICH's and
// Slurm's PMI, srun).
static int launcher_world(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) return atoi(v);
    }
    return 1;
}

#ifdef MALA_MPI
#include <mpi.h>

static int g_rank = 0, g_world = 1, g_local = 0, g_on = 0;
static char g_engine[MPI_MAX_LIBRARY_VERSION_STRING + 16];

void dist_init(int *argc, char ***argv) {
    // One process needs no MPI: no MPI_Init (no singleton start-up, nothing of Open MPI's left
    // at exit), every collective below returns at once.
    if (g_on || launcher_world() == 1) return;
    int provided;
    // only the main thread calls MPI (the loader thread and OpenMP workers never do)
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) FATAL("MPI_Init failed");
    g_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    if (g_world == 1)
        FATAL("the launcher started %d processes but MPI sees one: mala's MPI library is not the launcher's (mpirun "
              "of another MPI?)", launcher_world());
    MPI_Comm local;
    int local_size;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &g_local);
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(ver, &len);
    for (int i = 0; i < len; i++)
        if (ver[i] == ',' || ver[i] == '\n') { ver[i] = 0; break; }
    snprintf(g_engine, sizeof g_engine, "MPI (%s)", ver);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    if (g_world > 1 && g_dev) g_dev->pick_device(g_local, local_size);  // before any CUDA context
}

void dist_finalize(void) {
    if (g_dev) g_dev->finalize();
    if (g_on) MPI_Finalize();
    g_on = 0;
}

int dist_rank(void) { return g_rank; }
int dist_world(void) { return g_world; }
int dist_local_rank(void) { return g_local; }
const char *dist_engine(void) { return g_on ? g_engine : "MPI (not initialised)"; }

// MPI counts are ints: big buffers go in chunks.
#define CHUNK ((size_t)1 << 30)

void dist_sum_f32(float *x, size_t n) {
    if (g_world == 1) return;
    for (size_t i = 0; i < n; i += CHUNK)
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)(n - i < CHUNK ? n - i : CHUNK), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

void dist_sum_f64(double *x, size_t n) {
    if (g_world == 1) return;
    for (size_t i = 0; i < n; i += CHUNK)
        MPI_Allreduce(MPI_IN_PLACE, x + i, (int)(n - i < CHUNK ? n - i : CHUNK), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int dist_sum_f32_device(float *x, size_t n) {
    if (g_world == 1) return 0;
    return g_dev ? g_dev->sum_f32(x, n) : -1;
}

size_t dist_block(size_t n) { return (n + (size_t)g_world - 1) / (size_t)g_world; }

// One block is one MPI count (an int); a block of 2^31 floats would be a model of 2^31 x world.
static int block_count(size_t block) {
    CHECK(block <= INT_MAX, "a block of %zu floats is more than one MPI call takes", block);
    return (int)block;
}

void dist_reduce_scatter_f32(const float *x, float *shard, size_t block) {
    if (g_world == 1) { memmove(shard, x, block * sizeof(float)); return; }
    MPI_Reduce_scatter_block(x, shard, block_count(block), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

void dist_allgather_f32(float *x, size_t block) {
    if (g_world == 1) return;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, block_count(block), MPI_FLOAT, MPI_COMM_WORLD);
}

void dist_gather_f32(float *x, size_t block, int root) {
    if (g_world == 1) return;
    if (g_rank == root) MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, block_count(block), MPI_FLOAT, root, MPI_COMM_WORLD);
    else MPI_Gather(x, block_count(block), MPI_FLOAT, NULL, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD);
}

int dist_reduce_scatter_f32_device(const float *x, float *shard, size_t block) {
    if (g_world == 1) return -1;  // the caller's copy
    return g_dev ? g_dev->reduce_scatter_f32(x, shard, block) : -1;
}

int dist_allgather_f32_device(float *x, size_t block) {
    if (g_world == 1) return 0;
    return g_dev ? g_dev->allgather_f32(x, block) : -1;
}

int dist_any(int flag) {
    if (g_world == 1) return flag != 0;
    int in = flag != 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

void dist_bcast(void *buf, size_t bytes, int root) {
    if (g_world == 1) return;
    for (size_t i = 0; i < bytes; i += CHUNK)
        MPI_Bcast((char *)buf + i, (int)(bytes - i < CHUNK ? bytes - i : CHUNK), MPI_BYTE, root, MPI_COMM_WORLD);
}

void dist_barrier(void) {
    if (g_world > 1) MPI_Barrier(MPI_COMM_WORLD);
}

void dist_abort(int code) {
    fflush(stderr);
    if (g_on && g_world > 1) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

#else  // one process

void dist_init(int *argc, char ***argv) {
    int w = launcher_world();
    if (w > 1)
        FATAL("this mala was built without MPI, but the launcher started %d processes: they would train %d "
              "independent copies. Install OpenMPI (libopenmpi-dev) and rebuild (make MPI=1), or run one process", w, w);
}
void dist_finalize(void) {}
int dist_rank(void) { return 0; }
int dist_world(void) { return 1; }
int dist_local_rank(void) { return 0; }
const char *dist_engine(void) { return "none (built without MPI)"; }
void dist_sum_f32(float *x, size_t n) {}
void dist_sum_f64(double *x, size_t n) {}
int dist_sum_f32_device(float *x, size_t n) { return 0; }
size_t dist_block(size_t n) { return n; }
void dist_reduce_scatter_f32(const float *x, float *shard, size_t block) { memmove(shard, x, block * sizeof(float)); }
void dist_allgather_f32(float *x, size_t block) {}
void dist_gather_f32(float *x, size_t block, int root) {}
int dist_reduce_scatter_f32_device(const float *x, float *shard, size_t block) { return -1; }
int dist_allgather_f32_device(float *x, size_t block) { return 0; }
int dist_any(int flag) { return flag != 0; }
void dist_bcast(void *buf, size_t bytes, int root) {}
void dist_barrier(void) {}
void dist_abort(int code) { exit(code); }

#endif
