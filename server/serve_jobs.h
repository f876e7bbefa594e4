// `mala serve`'s jobs: a bounded queue in front of one worker thread that generates with the
// public API (include/mala.h), each job's progress, step preview and result kept for the
// handlers that wait on it or poll it, and finished jobs expired after a while.
#ifndef MALA_SERVE_JOBS_H
#define MALA_SERVE_JOBS_H

#include <pthread.h>
#include <stdint.h>

#include "include/mala.h"
#include "server/serve_request.h"

typedef enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_FAILED, JOB_CANCELLED } JobState;

typedef struct Job {
    char id[33];
    ServeRequest req;       // owned: the request as parsed
    int model;              // index into the queue's models
    mala_gen_params p;      // resolved: prompt, seed, sampler (on_step / user set by the worker)
    char infotext0[2048];   // the first image's parameters text, once done
    // under the queue's lock from here on
    JobState state;
    int step, steps, batch, batches;  // the step of batch `batch` of `batches`, each of `steps` steps
    double t_submit, t_start, t_end;
    uint8_t *preview;       // the latest step preview as PNG bytes (NULL before the first)
    size_t preview_len;
    uint64_t preview_seq;
    uint8_t **png;          // done: the count images as PNG bytes (with their parameters)
    size_t *png_len;
    int status;             // failed / cancelled: the HTTP status and message
    char error[512];
    int cancel;             // asked to stop
    int refs;               // the job table's one, and one per handler holding it
    struct Job *next;       // the job table
} Job;

typedef struct {
    mala_model **models;
    int nmodels;
    int qcap;               // queued jobs at most (the running one not counted)
    double ttl;             // seconds a finished job is kept
    const char *out_dir;    // NULL, or where every result PNG is also saved (never overwriting)
    // internal
    pthread_mutex_t lock;
    pthread_cond_t changed;
    Job **queue;
    int qlen, qhead;
    Job *table, *running;
    int stopping, started;
    pthread_t worker;
    uint64_t images_total, jobs_total, jobs_failed;
    double image_seconds;
} JobQueue;

int jobs_start(JobQueue *q);
// A new job holding req (moved in), for model index m with resolved parameters p: 0, or the
// HTTP status refusing it (429 queue full, 503 shutting down). On success the caller holds a
// reference (jobs_release).
int jobs_submit(JobQueue *q, ServeRequest *req, int m, const mala_gen_params *p, Job **out);
Job *jobs_find(JobQueue *q, const char *id);  // with a reference; NULL when unknown or expired
void jobs_release(JobQueue *q, Job *j);
// Waits until j has finished (done, failed or cancelled).
void jobs_wait(JobQueue *q, Job *j);
// 0, 404 (unknown), 409 (already finished).
int jobs_cancel(JobQueue *q, const char *id);
// Cancels the running job (A1111's interrupt); 1 when there was one.
int jobs_interrupt(JobQueue *q);
// Shutdown: new jobs are refused (503), queued ones fail with 503, the running one is cancelled;
// returns when the worker has stopped.
void jobs_stop(JobQueue *q);
void jobs_free(JobQueue *q);
int jobs_queued(JobQueue *q);
const char *job_state_name(JobState s);
// n bytes from /dev/urandom; -1 when it cannot be read.
int serve_random(void *buf, size_t n);

#endif
