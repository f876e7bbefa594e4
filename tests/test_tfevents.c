// TensorBoard event files: formats/tfevents.c's records read back by a reader of
// our own (tests/tfevents_read.h: both CRCs checked, every field decoded), a full disk as an error,
// and `mala train`'s file: log.csv's rows as scalars, the grids' PNG bytes as images, a new file per
// start that leaves the earlier one's bytes alone, --tensorboard 0. Two independent readers check
// the same files: tools/ref/read_tfevents.py (pure Python) and tools/ref/check_tfevents_protobuf.py (Google's
// protobuf library with the committed .proto definitions).
#include <dirent.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "testcli.h"  // defines: run, g_out, g_err, mala_bin
#include "formats/tfevents.h"
#include "tfevents_read.h"

#define TINY "--model DiT-T/4 --batch 4 --log-every 1 --threads 2 --limit 16"
// The event files in dir, sorted (as TensorBoard reads them); returns the count.
static int event_files(const char *dir, char names[][512], int cap) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20) && n < cap) snprintf(names[n++], 512, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[512];
            memcpy(t, names[j], 512); memcpy(names[j], names[j - 1], 512); memcpy(names[j - 1], t, 512);
        }
    return n;
}

static uint8_t *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n + 1);
    ck_assert_uint_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static TfeRecord *read_ok(const char *path, int *n) {
    TfeRecord *r;
    char why[256];
    *n = tfe_read_file(path, &r, why, sizeof why);
    ck_assert_msg(*n >= 1, "%s: %s", path, why);
    ck_assert_str_eq(r[0].file_version, "brain.Event:2");
    return r;
}

START_TEST(crc32c_known_values) {
    ck_assert_uint_eq(tfev_crc32c("123456789", 9), 0xe3069283u);  // the CRC-32C check value
    ck_assert_uint_eq(tfev_crc32c("", 0), 0);
    uint8_t zeros[32] = {0};
    ck_assert_uint_eq(tfev_crc32c(zeros, 32), 0x8a9136aau);  // RFC 3720 B.4
}
END_TEST

START_TEST(events_round_trip) {
    tu_make_tmpdir("tfev");
    TfEvents w = {0};
    MalaErr err;
    double t0 = (double)time(NULL);
    ck_assert_int_eq(tfev_open_dir(&w, tu_tmp, &err), 0);
    const char *tags[] = {"train/loss", "train/lr"};
    const float vals[] = {0.25f, -1e-4f};
    const uint8_t png[] = {0x89, 'P', 'N', 'G', 0, 1, 2, 3};
    ck_assert_int_eq(tfev_scalars(&w, 7, tags, vals, 2, &err), 0);
    ck_assert_int_eq(tfev_image(&w, 300, "samples", 36, 138, 3, png, sizeof png, &err), 0);
    ck_assert_int_eq(tfev_session_start(&w, 5000000000ll, &err), 0);
    ck_assert_int_eq(tfev_close(&w, &err), 0);
    char first[4200];
    snprintf(first, sizeof first, "%s", w.path);
    size_t n0;
    uint8_t *before = file_bytes(first, &n0);
    TfEvents w2 = {0};  // a second file in the same second: another name, the first untouched
    ck_assert_int_eq(tfev_open_dir(&w2, tu_tmp, &err), 0);
    ck_assert_int_eq(tfev_close(&w2, &err), 0);
    ck_assert_str_ne(w2.path, first);
    char names[4][512];
    ck_assert_int_eq(event_files(tu_tmp, names, 4), 2);
    size_t n1;
    uint8_t *after = file_bytes(first, &n1);
    ck_assert(n0 == n1 && !memcmp(before, after, n0));

    int n;
    TfeRecord *r = read_ok(first, &n);
    ck_assert_int_eq(n, 4);
    ck_assert_msg(r[0].wall_time >= t0 - 1 && r[0].wall_time <= t0 + 60, "wall_time %f", r[0].wall_time);
    ck_assert_int_eq(r[1].step, 7);
    ck_assert_int_eq(r[1].nvalues, 2);
    ck_assert_str_eq(r[1].values[0].tag, "train/loss");
    ck_assert(r[1].values[0].has_simple && r[1].values[0].simple == 0.25f);
    ck_assert_str_eq(r[1].values[1].tag, "train/lr");
    ck_assert(r[1].values[1].simple == -1e-4f);
    ck_assert_int_eq(r[2].step, 300);
    const TfeValue *v = &r[2].values[0];
    ck_assert_str_eq(v->tag, "samples");
    ck_assert(v->has_image && v->height == 36 && v->width == 138 && v->colorspace == 3);
    ck_assert(v->png_len == sizeof png && !memcmp(v->png, png, sizeof png));
    ck_assert_int_eq(r[3].step, 5000000000ll);
    ck_assert_int_eq(r[3].session_status, 1);
    tfe_free(r, n);

    after[n0 - 1] ^= 1;  // a flipped bit in the last record's CRC is caught
    FILE *f = fopen(first, "wb");
    fwrite(after, 1, n0, f);
    fclose(f);
    char why[256];
    ck_assert_int_eq(tfe_read_file(first, &r, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "record 3: data CRC"), "%s", why);
    free(before);
    free(after);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(full_disk_is_an_error) {
    FILE *f = fopen("/dev/full", "wb");
    if (!f) return;  // (no /dev/full here)
    TfEvents w = {0};
    MalaErr err;
    ck_assert_int_ne(tfev_attach(&w, f, "/dev/full", &err), 0);
    ck_assert_msg(strstr(err.msg, "/dev/full: cannot write: No space left on device"), "%s", err.msg);
    tfev_close(&w, &err);
    TfEvents w2 = {0};
    ck_assert_int_ne(tfev_open_dir(&w2, "/no/such/dir", &err), 0);
    ck_assert_msg(strstr(err.msg, "/no/such/dir/events.out.tfevents.") && strstr(err.msg, "cannot create"), "%s",
                  err.msg);
}
END_TEST

// log.csv's row for step s: loss, mse, vb, grad_norm, img_per_s, lr, skipped.
static void csv_row(const char *csv, int s, double *col) {
    char buf[8192];
    slurp(csv, buf, sizeof buf);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        int step;
        if (sscanf(line, "%d,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &step, &col[0], &col[1], &col[2], &col[3], &col[4], &col[5],
                   &col[6]) == 8 && step == s)
            return;
    }
    ck_abort_msg("%s: no row for step %d", csv, s);
}

// Every scalar of the step-s record equals log.csv's column (to its 6 printed digits).
static void check_row(const TfeRecord *r, const char *csv, int s) {
    static const char *const tags[] = {"train/loss",      "train/mse", "train/vb", "train/grad_norm",
                                       "train/img_per_s", "train/lr",  "train/skipped"};
    double col[7];
    csv_row(csv, s, col);
    ck_assert_int_eq(r->nvalues, 7);
    for (int k = 0; k < 7; k++) {
        const TfeValue *v = NULL;
        for (int i = 0; i < r->nvalues; i++)
            if (!strcmp(r->values[i].tag, tags[k])) v = &r->values[i];
        ck_assert_msg(v && v->has_simple, "step %d: no scalar %s", s, tags[k]);
        ck_assert_msg(fabs(v->simple - col[k]) <= 1e-5 * fabs(col[k]) + 6e-3 * (k == 4), "step %d %s: %g, log.csv %g", s,
                      tags[k], v->simple, col[k]);
    }
}

// tools/ref/read_tfevents.py, the independent reader (its own CRC-32C, protobuf walk and PNG check),
// reads every record of the run's files; skipped where there is no python3.
static void python_reads(const char *dir) {
    if (access("/usr/bin/python3", X_OK)) return;
    char cmd[1200], out[1 << 15];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/ref/read_tfevents.py %s > %s/py.txt 2>&1", dir, tu_tmp);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "%s/py.txt", tu_tmp);
    slurp(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "tools/ref/read_tfevents.py failed:\n%s", out);
    ck_assert_msg(strstr(out, "0 step 0 wall_time ") && strstr(out, "file_version brain.Event:2") &&
                  strstr(out, "1 step 1 wall_time ") && strstr(out, "train/loss = ") &&
                  strstr(out, "samples = image 104x36 colorspace 3, PNG ") && strstr(out, "session_log status START"),
                  "%s", out);
}

// tools/ref/check_tfevents_protobuf.py: Google's protobuf library parses every record with the committed
// .proto definitions (tests/fixtures/tensorboard/) and writes it back to the same bytes, and every
// log.csv row and grid is in the files. Needs python3-protobuf and protoc (skipped without them).
static void protobuf_reads(const char *dir) {
    if (system("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null && command -v protoc >/dev/null")) {
        printf("SKIP the protobuf check of %s: no python3-protobuf / protoc (apt-get install python3-protobuf "
               "protobuf-compiler)\n", dir);
        return;
    }
    char cmd[1200], out[1 << 14];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/ref/check_tfevents_protobuf.py %s > %s/pb.txt 2>&1", dir, tu_tmp);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "%s/pb.txt", tu_tmp);
    slurp(cmd, out, sizeof out);
    ck_assert_msg(rc == 0 && strstr(out, "2 files, 10 records: 4 log.csv rows x 7 scalars and 3 images match"),
                  "tools/ref/check_tfevents_protobuf.py:\n%s", out);
}

START_TEST(train_writes_events) {
    tu_make_tmpdir("tftrain");
    const char *dir = tp("run");
    RUN_OK("train " TINY " --iters 3 --sample-every 2 --sample-steps 2 --sample-images 3 --out %s", dir);
    char names[4][512], csv[600];
    ck_assert_int_eq(event_files(dir, names, 4), 1);
    snprintf(csv, sizeof csv, "%s/log.csv", dir);
    int n;
    TfeRecord *r = read_ok(names[0], &n);
    // version; rows 1, 2; grid 2; row 3; grid 3 (the final one)
    ck_assert_int_eq(n, 6);
    const int steps[] = {0, 1, 2, 2, 3, 3}, grid[] = {0, 0, 0, 1, 0, 1};
    for (int i = 1; i < n; i++) {
        ck_assert_int_eq(r[i].step, steps[i]);
        if (!grid[i]) { check_row(&r[i], csv, steps[i]); continue; }
        char png[600];
        snprintf(png, sizeof png, "%s/samples/%07d.png", dir, steps[i]);
        size_t len;
        uint8_t *b = file_bytes(png, &len);
        const TfeValue *v = &r[i].values[0];
        ck_assert_str_eq(v->tag, "samples");
        ck_assert(v->has_image && v->colorspace == 3 && v->png_len == len && !memcmp(v->png, b, len));
        ck_assert(v->width == ((int64_t)b[16] << 24 | b[17] << 16 | b[18] << 8 | b[19]) &&
                 v->height == ((int64_t)b[20] << 24 | b[21] << 16 | b[22] << 8 | b[23]));
        free(b);
    }
    tfe_free(r, n);

    size_t n0;
    uint8_t *before = file_bytes(names[0], &n0);
    sleep(1);  // (the name carries the second; a clash would only add ".1")
    RUN_OK("train --resume --out %s --iters 4 --threads 2", dir);
    char again[4][512];
    ck_assert_int_eq(event_files(dir, again, 4), 2);
    ck_assert_str_eq(again[0], names[0]);
    size_t n1;
    uint8_t *after = file_bytes(names[0], &n1);
    ck_assert_msg(n0 == n1 && !memcmp(before, after, n0), "resume changed %s", names[0]);
    r = read_ok(again[1], &n);
    ck_assert_int_eq(n, 4);  // version, session start, row 4, grid 4
    ck_assert(r[1].session_status == 1 && r[1].step == 4 && r[1].nvalues == 0);
    ck_assert_int_eq(r[2].step, 4);
    check_row(&r[2], csv, 4);
    ck_assert(r[3].step == 4 && r[3].values[0].has_image);
    tfe_free(r, n);
    free(before);
    free(after);
    python_reads(dir);
    protobuf_reads(dir);

    RUN_OK("train " TINY " --iters 1 --sample-every 0 --tensorboard 0 --out %s", tp("off"));
    ck_assert_int_eq(event_files(tp("off"), names, 4), 0);
    RUN_OK("train --resume --out %s --iters 2 --threads 2", tp("off"));  // the run keeps its setting
    ck_assert_int_eq(event_files(tp("off"), names, 4), 0);
    tu_rm_tmpdir();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("tfevents");
    TCase *tc = tcase_create("tfevents");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, crc32c_known_values);
    tcase_add_test(tc, events_round_trip);
    tcase_add_test(tc, full_disk_is_an_error);
    tcase_add_test(tc, train_writes_events);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
