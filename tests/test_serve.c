// mala serve (server/, docs/serve.md): the request parsers, then a server on a free 127.0.0.1 port
// driven over HTTP: every endpoint, every error status, the bytes against `mala sample`, async jobs
// cancelled in the middle, a full queue, the API key, and the shutdown.
#include <check.h>
#include <pthread.h>
#include <time.h>

#include "formats/image_io.h"
#include "formats/json.h"
#include "server/base64.h"
#include "server/serve_request.h"
#include "testcli.h"
#include "testmodels.h"
#include <dirent.h>
#include "tserve_client.h"

#define MODEL "assets/mala-dit-fmnist.safetensors"

START_TEST(test_base64) {
    const uint8_t bytes[] = {0, 1, 2, 250, 251, 252, 253};
    for (size_t n = 0; n <= sizeof bytes; n++) {
        char *t = base64_encode(bytes, n);
        uint8_t *back;
        size_t len;
        ck_assert_int_eq(base64_decode(t, strlen(t), 64, &back, &len), 0);
        ck_assert_uint_eq(len, n);
        ck_assert(!memcmp(back, bytes, n));
        free(back);
        free(t);
    }
    uint8_t *b;
    size_t len;
    ck_assert_int_eq(base64_decode("aGVsbG8", 7, 64, &b, &len), 0);  // no padding
    ck_assert(len == 5 && !memcmp(b, "hello", 5));
    free(b);
    const char *url = "data:image/png;base64,aGVs\nbG8=";
    ck_assert_int_eq(base64_decode(url, strlen(url), 64, &b, &len), 0);
    ck_assert(len == 5 && !memcmp(b, "hello", 5));
    free(b);
    const char *bad[] = {"aGVs*G8=", "a", "aGVsbG8=aGVs", "aG=Vs", "data:image/png,aGVs", "aGVsbG8==="};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(base64_decode(bad[i], strlen(bad[i]), 64, &b, &len) == -1, "%s accepted", bad[i]);
    ck_assert_int_eq(base64_decode("aGVsbG8=", 8, 4, &b, &len), -1);  // past max
}
END_TEST

static int parse(const char *json, ReqKind k, ServeRequest *r, ServeError *e) {
    ServeLimits lim = {1000, 8, 1000};
    return serve_request_parse(json, strlen(json), k, &lim, r, e);
}

START_TEST(test_request_parse) {
    ServeRequest r;
    ServeError e;
    ck_assert_int_eq(parse("{}", REQ_TXT2IMG, &r, &e), 0);
    ck_assert(!strcmp(r.sampler, "ddim") && r.steps == 50 && r.count == 1 && r.seed == -1 && r.cfg_scale == 4.0f);
    ck_assert_int_eq(parse("{\"prompt\":\"Sneaker\",\"sampler_name\":\"DPM++ 2M\",\"steps\":7,\"batch_size\":2,"
                           "\"n_iter\":3,\"seed\":12,\"cfg_scale\":1.5,\"width\":32}", REQ_TXT2IMG, &r, &e), 0);
    ck_assert(!strcmp(r.sampler, "dpm++2m") && r.steps == 7 && r.count == 6 && r.batch_size == 2 && r.seed == 12 &&
              r.cfg_scale == 1.5f && r.width == 32 && !strcmp(r.prompt, "Sneaker"));
    ck_assert_int_eq(parse("{\"n\":3,\"size\":\"32x32\",\"model\":\"m\"}", REQ_OPENAI, &r, &e), 0);
    ck_assert(r.count == 3 && r.width == 32 && r.height == 32 && !strcmp(r.model, "m"));
    struct { const char *json; ReqKind k; int status; const char *msg; } bad[] = {
        {"{", REQ_TXT2IMG, 400, "not JSON"},
        {"[1]", REQ_TXT2IMG, 400, "not an object"},
        {"{\"steps\":0}", REQ_TXT2IMG, 400, "steps 0"},
        {"{\"steps\":2.5}", REQ_TXT2IMG, 400, "whole number"},
        {"{\"steps\":\"5\"}", REQ_TXT2IMG, 400, "expected a number, got string"},
        {"{\"sampler_name\":\"Euler a\"}", REQ_TXT2IMG, 400, "sampler_name Euler a"},
        {"{\"batch_size\":4,\"n_iter\":4}", REQ_TXT2IMG, 400, "more than the 8 images"},
        {"{\"seed\":-2}", REQ_TXT2IMG, 400, "seed -2"},
        {"{\"response_format\":\"url\"}", REQ_OPENAI, 400, "b64_json only"},
        {"{\"size\":\"big\"}", REQ_OPENAI, 400, "size big"},
        {"{}", REQ_IMG2IMG, 400, "init_images"},
        {"{\"init_images\":[\"!!\"]}", REQ_IMG2IMG, 400, "not base64"},
        {"{\"init_images\":[\"aGVsbG8=\"],\"denoising_strength\":0}", REQ_IMG2IMG, 400, "(0, 1]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(parse(bad[i].json, bad[i].k, &r, &e) == -1, "%s accepted", bad[i].json);
        ck_assert_int_eq(e.status, bad[i].status);
        ck_assert_msg(strstr(e.msg, bad[i].msg), "%s: '%s' lacks '%s'", bad[i].json, e.msg, bad[i].msg);
    }
    char big[2000];  // an image past max_image_bytes (1000): 413
    snprintf(big, sizeof big, "{\"init_images\":[\"%01800d\"]}", 0);
    memset(strchr(big, '[') + 2, 'A', 1800);
    ck_assert_int_eq(parse(big, REQ_IMG2IMG, &r, &e), -1);
    ck_assert_int_eq(e.status, 413);
    ck_assert_int_eq(parse("{\"init_images\":[\"aGVsbG8=\"],\"mask\":\"aGk=\",\"inpainting_mask_invert\":1}",
                           REQ_IMG2IMG, &r, &e), 0);
    ck_assert(r.has_init && r.init_len == 5 && r.mask_len == 2 && r.mask_invert == 1 && r.strength == 1.0f);
    serve_request_free(&r);
}
END_TEST

// ---- against a running server ----

static JsonValue *json_of(const HttpReply *r) {
    MalaErr err;
    JsonValue *v = json_parse(r->body, r->len, &err);
    ck_assert_msg(v != NULL, "reply is not JSON (%s): %.200s", err.msg, r->body);
    return v;
}

// The error reply's message, checked to be {error: {code, message}} with code = status.
static void expect_err(HttpReply r, int status, const char *part) {
    ck_assert_msg(r.status == status, "status %d, expected %d: %.300s", r.status, status, r.body ? r.body : "");
    JsonValue *v = json_of(&r);
    const JsonValue *e = json_get(v, "error"), *code = e ? json_get(e, "code") : NULL, *msg = e ? json_get(e, "message") : NULL;
    ck_assert_msg(code && msg && code->number == status && msg->type == JSON_STRING, "not an error object: %s", r.body);
    ck_assert_msg(strstr(msg->str, part), "message '%s' lacks '%s'", msg->str, part);
    json_free(v);
    free(r.body);
}

// images[i] of a reply ({images: [...]} or OpenAI's {data: [{b64_json}]}) as PNG bytes.
static uint8_t *image_of(const HttpReply *r, int i, size_t *len) {
    JsonValue *v = json_of(r);
    const JsonValue *a = json_get(v, "images"), *d = json_get(v, "data");
    const JsonValue *s = a ? &a->items[i] : d ? json_get(&d->items[i], "b64_json") : NULL;
    ck_assert_msg(s && s->type == JSON_STRING, "no image %d in %.200s", i, r->body);
    uint8_t *png;
    ck_assert_int_eq(base64_decode(s->str, s->len, 1 << 24, &png, len), 0);
    json_free(v);
    return png;
}

static char *json_str(const HttpReply *r, const char *key) {
    JsonValue *v = json_of(r);
    const JsonValue *s = json_get(v, key);
    char *out = s && s->type == JSON_STRING ? strdup(s->str) : NULL;
    json_free(v);
    return out;
}

static void poll_until(int port, const char *id, const char *state, int min_step) {
    char path[128];
    snprintf(path, sizeof path, "/mala/v1/jobs/%s", id);
    for (int t = 0; t < 600; t++) {
        HttpReply r = http_get(port, path);
        ck_assert_int_eq(r.status, 200);
        JsonValue *v = json_of(&r);
        int ok = !strcmp(json_get(v, "state")->str, state) && json_get(v, "step")->number >= min_step;
        json_free(v);
        free(r.body);
        if (ok) return;
        usleep(50000);
    }
    ck_abort_msg("job %s never reached %s", id, state);
}

START_TEST(test_generate_and_bytes) {
    tu_make_tmpdir("serve");
    const char *args[] = {"--model", MODEL, NULL};
    Served s = serve_start(mala_bin(), tp("log"), args);
    ck_assert_msg(s.port > 0, "the server did not start (see its log)");
    HttpReply r = http_get(s.port, "/health");
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    r = http_get(s.port, "/sdapi/v1/sd-models");
    ck_assert(r.status == 200 && strstr(r.body, "\"model_name\":\"mala-dit-fmnist\"") && strstr(r.body, "Sneaker"));
    ck_assert(!strstr(r.body, "assets/"));  // clients never see paths
    free(r.body);
    r = http_get(s.port, "/v1/models");
    ck_assert(r.status == 200 && strstr(r.body, "\"id\":\"mala-dit-fmnist\""));
    free(r.body);
    r = http_get(s.port, "/sdapi/v1/samplers");
    ck_assert(r.status == 200 && strstr(r.body, "\"DPM++ 2M\"") && strstr(r.body, "\"DDIM\""));
    free(r.body);
    r = http_get(s.port, "/");
    ck_assert(r.status == 200 && strstr(r.head, "text/html") && strstr(r.body, "<html"));
    free(r.body);

    // the same bytes as `mala sample --out-dir`: image 1 of a batch of 2
    r = http_post(s.port, "/sdapi/v1/txt2img",
                  "{\"prompt\":\"Sneaker\",\"steps\":10,\"seed\":3,\"sampler_name\":\"DDIM\",\"batch_size\":2,\"cfg_scale\":2.5}");
    ck_assert_msg(r.status == 200, "%d %.300s", r.status, r.body);
    size_t len, flen;
    uint8_t *png = image_of(&r, 1, &len);
    char *info = json_str(&r, "info");
    ck_assert(info && strstr(info, "\"all_seeds\":[3,3]") && strstr(info, "Seed index: 1"));
    free(info);
    free(r.body);
    RUN_OK("sample --ckpt %s --class Sneaker --n 2 --steps 10 --seed 3 --sampler ddim --cfg-scale 2.5 --out-dir %s",
           MODEL, tp("cli"));
    uint8_t *cli = tu_read_file(tp("cli/000001_Sneaker.png"), &flen);
    ck_assert_msg(len == flen && !memcmp(png, cli, len), "the server's PNG differs from mala sample's");
    free(cli);

    // png-info reads its parameters back
    char *b64 = base64_encode(png, len), body[8192];
    snprintf(body, sizeof body, "{\"image\":\"data:image/png;base64,%s\"}", b64);
    r = http_post(s.port, "/sdapi/v1/png-info", body);
    ck_assert(r.status == 200 && strstr(r.body, "Steps: 10") && strstr(r.body, "Seed: 3"));
    free(r.body);

    // img2img with a mask: the pixels of `mala sample --init-image --mask`
    uint8_t mask[32 * 32];
    for (int i = 0; i < 32 * 32; i++) mask[i] = i < 16 * 32 ? 255 : 0;
    MalaErr err;
    ck_assert_int_eq(image_write_png(tp("mask.png"), mask, 32, 32, 1, &err), 0);
    FILE *f = fopen(tp("init.png"), "wb");
    fwrite(png, 1, len, f);
    fclose(f);
    size_t mlen;
    uint8_t *mpng = tu_read_file(tp("mask.png"), &mlen);
    char *mb64 = base64_encode(mpng, mlen);
    char *big = malloc(strlen(b64) + strlen(mb64) + 512);
    sprintf(big, "{\"init_images\":[\"%s\"],\"mask\":\"%s\",\"denoising_strength\":0.6,\"prompt\":\"Sandal\",\"steps\":8,"
                 "\"seed\":5,\"sampler_name\":\"ddim\"}", b64, mb64);
    r = http_post(s.port, "/sdapi/v1/img2img", big);
    ck_assert_msg(r.status == 200, "%d %.300s", r.status, r.body);
    size_t ilen;
    uint8_t *ipng = image_of(&r, 0, &ilen);
    free(r.body);
    RUN_OK("sample --ckpt %s --class Sandal --n 1 --steps 8 --seed 5 --sampler ddim --init-image %s --mask %s "
           "--strength 0.6 --out-dir %s", MODEL, tp("init.png"), tp("mask.png"), tp("cli2"));
    size_t clen;
    uint8_t *cpng = tu_read_file(tp("cli2/000000_Sandal.png"), &clen), *a, *b;
    int w1, h1, w2, h2;
    ck_assert_int_eq(image_decode(ipng, ilen, "server", 3, NULL, &a, &w1, &h1, &err), 0);
    ck_assert_int_eq(image_decode(cpng, clen, "cli", 3, NULL, &b, &w2, &h2, &err), 0);
    ck_assert(w1 == w2 && h1 == h2 && !memcmp(a, b, (size_t)w1 * h1 * 3));
    free(a), free(b), free(ipng), free(cpng), free(big), free(mb64), free(mpng), free(b64), free(png);

    // OpenAI's API
    r = http_post(s.port, "/v1/images/generations",
                  "{\"model\":\"mala-dit-fmnist\",\"prompt\":\"0.7 Sneaker + 0.3 Sandal\",\"n\":2,\"size\":\"32x32\"}");
    ck_assert_msg(r.status == 200 && strstr(r.body, "\"created\":"), "%d %.300s", r.status, r.body);
    png = image_of(&r, 1, &len);
    free(png);
    free(r.body);

    // errors: the statuses, and the CLI's text for the same mistake
    expect_err(http_post(s.port, "/sdapi/v1/txt2img", "{"), 400, "not JSON");
    expect_err(http_post(s.port, "/sdapi/v1/txt2img", "{\"model\":\"nope\"}"), 404, "model nope");
    expect_err(http_post(s.port, "/sdapi/v1/txt2img", "{\"width\":64}"), 400, "makes 32x32 images");
    expect_err(http_post(s.port, "/sdapi/v1/txt2img", "{\"steps\":1001}"), 400, "steps 1001");
    ck_assert_int_eq(run("sample --ckpt %s --class Snekaer --n 1 --out %s", MODEL, tp("x.png")), 1);
    const char *cli_msg = strstr(g_err, "Snekaer: ");
    ck_assert_ptr_nonnull(cli_msg);
    char want[1024];
    snprintf(want, sizeof want, "%.*s", (int)strcspn(cli_msg, "\n"), cli_msg);
    expect_err(http_post(s.port, "/sdapi/v1/txt2img", "{\"prompt\":\"Snekaer\"}"), 400, want);
    expect_err(http_get(s.port, "/sdapi/v1/txt2img"), 405, "use POST");
    expect_err(http_get(s.port, "/nope"), 404, "no such endpoint");
    expect_err(http_get(s.port, "/mala/v1/jobs/0123"), 404, "no such job");
    expect_err(http_post(s.port, "/mala/v1/jobs/0123/cancel", "{}"), 404, "no such job");
    r = http_get(s.port, "/metrics");
    ck_assert(r.status == 200 && strstr(r.body, "mala_images_total 5") && strstr(r.body, "mala_queue_length 0"));
    free(r.body);
    ck_assert_int_eq(serve_stop(&s), 0);
    tu_rm_tmpdir();
}
END_TEST

// Every model kind in one server: DiG, DiC, a latent DiT with --vae (the pixel models loaded
// without it), and a torch.save file; each request's PNG equals `mala sample`'s.
START_TEST(test_model_kinds) {
    tu_make_tmpdir("serve");
    make_latent_model(tp("lat.safetensors"), "tests/fixtures/vae_tiny.safetensors");
    RUN_OK("train --model DiG-T/4 --batch 2 --limit 8 --iters 1 --sample-every 0 --threads 2 --out %s", tp("dig"));
    RUN_OK("train --model DiC-T --batch 2 --limit 8 --iters 1 --sample-every 0 --threads 2 --out %s", tp("dic"));
    RUN_OK("export --ckpt %s --out %s", tp("dig/checkpoints/0000001.safetensors"), tp("dig.safetensors"));
    const char *vae = "tests/fixtures/vae_tiny.safetensors";
    const char *files[] = {tp("dig.safetensors"), tp("dic/checkpoints/0000001.safetensors"), tp("lat.safetensors"),
                           "tests/fixtures/torchzip_sd.pt"};
    const char *stems[] = {"dig", "0000001", "lat", "torchzip_sd"};
    const char *args[] = {"--model", files[0], "--model", files[1], "--model", files[2], "--model", files[3],
                          "--vae", vae, "--heads", "2", NULL};
    Served s = serve_start(mala_bin(), tp("log"), args);
    ck_assert_msg(s.port > 0, "the server did not start");
    for (int i = 0; i < 4; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"%s\",\"prompt\":\"1\",\"steps\":3,\"seed\":4,\"sampler_name\":\"DPM++ 2M\"}",
                 stems[i]);
        HttpReply r = http_post(s.port, "/sdapi/v1/txt2img", body);
        ck_assert_msg(r.status == 200, "%s: %d %.300s", stems[i], r.status, r.body);
        size_t len, clen;
        uint8_t *png = image_of(&r, 0, &len);
        free(r.body);
        char dir[64];
        snprintf(dir, sizeof dir, "cli%d", i);
        RUN_OK("sample --ckpt %s%s%s --class 1 --n 1 --steps 3 --seed 4 --sampler dpm++2m --out-dir %s%s", files[i],
               i >= 2 ? " --vae " : "", i >= 2 ? vae : "", tp(dir), i == 3 ? " --heads 2" : "");
        DIR *d = opendir(tp(dir));
        struct dirent *e;
        char found[512] = "";
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.') snprintf(found, sizeof found, "%s/%s", tp(dir), e->d_name);
        if (d) closedir(d);
        uint8_t *cli = tu_read_file(found, &clen);
        ck_assert_msg(len == clen && !memcmp(png, cli, len), "%s: the server's PNG differs from mala sample's", stems[i]);
        free(cli);
        free(png);
    }
    ck_assert_int_eq(serve_stop(&s), 0);
    tu_rm_tmpdir();
}
END_TEST

typedef struct {
    int port;
    HttpReply r;
} Bg;
static void *bg_txt2img(void *arg) {
    Bg *b = arg;
    b->r = http_post(b->port, "/sdapi/v1/txt2img", "{\"prompt\":\"Bag\",\"steps\":5}");
    return NULL;
}

static char *post_job(int port, const char *json) {
    HttpReply r = http_post(port, "/mala/v1/jobs", json);
    ck_assert_msg(r.status == 202, "%d %.300s", r.status, r.body);
    char *id = json_str(&r, "id");
    free(r.body);
    return id;
}

START_TEST(test_jobs_queue_shutdown) {
    tu_make_tmpdir("serve");
    mkdir(tp("out"), 0755);
    const char *args[] = {"--model", MODEL, "--queue", "2", "--max-body-mb", "1", "--out-dir", tp("out"), NULL};
    Served s = serve_start(mala_bin(), tp("log"), args);
    ck_assert(s.port > 0);
    // a long job: cancelled in the middle, after its preview appeared
    const char *slow = "{\"prompt\":\"Coat\",\"steps\":1000,\"sampler_name\":\"DDPM\",\"batch_size\":8}";
    char *a = post_job(s.port, slow);
    poll_until(s.port, a, "running", 2);
    HttpReply r = http_get(s.port, "/sdapi/v1/progress");
    ck_assert(r.status == 200 && strstr(r.body, a) && strstr(r.body, "\"current_image\":\"iVBOR"));
    free(r.body);
    // the queue holds 2: the third waiting job is refused
    char *b = post_job(s.port, slow), *c = post_job(s.port, slow);
    expect_err(http_post(s.port, "/mala/v1/jobs", slow), 429, "queue is full");
    char path[128];
    snprintf(path, sizeof path, "/mala/v1/jobs/%s/cancel", a);
    r = http_post(s.port, path, "{}");
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    snprintf(path, sizeof path, "/mala/v1/jobs/%s", a);
    for (int t = 0; t < 200; t++) {  // cancelled: an error 409, and b runs
        r = http_get(s.port, path);
        int done = strstr(r.body, "\"state\":\"cancelled\"") != NULL;
        if (done) ck_assert(strstr(r.body, "\"code\":409"));
        free(r.body);
        if (done) break;
        ck_assert_msg(t < 199, "job %s was not cancelled", a);
        usleep(50000);
    }
    snprintf(path, sizeof path, "/mala/v1/jobs/%s/cancel", a);
    expect_err(http_post(s.port, path, "{}"), 409, "already finished");
    snprintf(path, sizeof path, "/mala/v1/jobs/%s/cancel", c);  // cancelled while it waits
    r = http_post(s.port, path, "{}");
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    poll_until(s.port, b, "running", 1);
    r = http_post(s.port, "/sdapi/v1/interrupt", "{}");  // A1111's interrupt: the running job
    ck_assert(r.status == 200 && strstr(r.body, "true"));
    free(r.body);
    poll_until(s.port, b, "cancelled", 0);
    poll_until(s.port, c, "cancelled", 0);
    // a quick job finishes, its result saved in --out-dir
    char *d = post_job(s.port, "{\"prompt\":\"Trouser\",\"steps\":3,\"seed\":1}");
    poll_until(s.port, d, "done", 0);
    snprintf(path, sizeof path, "/mala/v1/jobs/%s", d);
    r = http_get(s.port, path);
    ck_assert(r.status == 200 && strstr(r.body, "\"images\":[\"iVBOR") && strstr(r.body, "Seed: 1"));
    free(r.body);
    snprintf(path, sizeof path, "out/%s-00.png", d);
    ck_assert(exists(tp(path)));
    // a body past --max-body-mb
    size_t n = (3u << 19);
    char *huge = malloc(n + 1);
    memset(huge, ' ', n);
    huge[n] = 0;
    expect_err(http_req(s.port, "POST", "/sdapi/v1/txt2img", NULL, huge, n), 413, "larger than");
    free(huge);
    // shutdown: the running job is cancelled, the waiting request answered 503, exit 0
    char *e = post_job(s.port, slow);
    poll_until(s.port, e, "running", 1);
    Bg bg = {s.port, {0}};
    pthread_t th;
    pthread_create(&th, NULL, bg_txt2img, &bg);
    for (int t = 0; t < 100; t++) {  // until the waiting request is queued
        r = http_get(s.port, "/health");
        int queued = strstr(r.body, "\"queue\":1") != NULL;
        free(r.body);
        if (queued) break;
        usleep(50000);
    }
    ck_assert_int_eq(serve_stop(&s), 0);
    pthread_join(th, NULL);
    expect_err(bg.r, 503, "shutting down");
    free(a), free(b), free(c), free(d), free(e);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(test_api_key) {
    tu_make_tmpdir("serve");
    const char *args[] = {"--model", MODEL, "--api-key", "s3cret", NULL};
    Served s = serve_start(mala_bin(), tp("log"), args);
    ck_assert(s.port > 0);
    expect_err(http_get(s.port, "/sdapi/v1/sd-models"), 401, "API key");
    expect_err(http_req(s.port, "GET", "/v1/models", "Authorization: Bearer s3cre\r\n", NULL, 0), 401, "API key");
    HttpReply r = http_req(s.port, "GET", "/v1/models", "Authorization: Bearer s3cret\r\n", NULL, 0);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    r = http_get(s.port, "/health");  // public, as the page is
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    ck_assert_int_eq(serve_stop(&s), 0);
    // refusals at start: a second model with the same stem, a host that is no address
    ck_assert_int_eq(run("serve --model %s --model %s --port 0", MODEL, MODEL), 1);
    ck_assert(strstr(g_err, "another model has the name mala-dit-fmnist"));
    ck_assert_int_eq(run("serve --model %s --host localhost", MODEL), 1);
    ck_assert(strstr(g_err, "--host localhost"));
    ck_assert_int_eq(run("serve --port 0"), 1);
    ck_assert(strstr(g_err, "needs --model"));
    tu_rm_tmpdir();
}
END_TEST

// ---- load: 8 clients, 200 requests, 127.0.0.1 ----

#define LOAD_CLIENTS 8
#define LOAD_PER_CLIENT 25

typedef struct {
    int port, client;
    double lat[LOAD_PER_CLIENT];
    int answered, images, refused, bad_answers;
    char ids[LOAD_PER_CLIENT][33];
    int nids;
} LoadClient;

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *load_client(void *arg) {
    LoadClient *c = arg;
    for (int i = 0; i < LOAD_PER_CLIENT; i++) {
        char body[256], path[128];
        HttpReply r;
        int kind = (c->client + i) % 5, want = 200;
        double t0 = mono();
        if (kind == 0) {
            snprintf(body, sizeof body, "{\"prompt\":\"%d\",\"steps\":4,\"seed\":%d}", i % 10, c->client * 100 + i);
            r = http_post(c->port, "/sdapi/v1/txt2img", body);
            if (r.status == 200) c->images++;
        } else if (kind == 1) {
            r = http_get(c->port, "/sdapi/v1/progress");
        } else if (kind == 2) {
            snprintf(body, sizeof body, "{\"prompt\":\"Bag\",\"steps\":%d,\"seed\":%d}", 4 + i % 8, i);
            r = http_post(c->port, "/mala/v1/jobs", body);
            want = 202;
            if (r.status == 202) {
                char *id = json_str(&r, "id");
                snprintf(c->ids[c->nids++], 33, "%s", id ? id : "");
                free(id);
            }
        } else if (kind == 3) {
            r = http_post(c->port, "/sdapi/v1/txt2img", (i & 1) ? "{\"steps\":" : "{\"sampler_name\":7}");
            want = 400;
        } else {  // cancel the last job this client queued (it may have finished: 409)
            if (c->nids) snprintf(path, sizeof path, "/mala/v1/jobs/%s/cancel", c->ids[c->nids - 1]);
            else snprintf(path, sizeof path, "/mala/v1/jobs/%032d/cancel", 0);
            r = http_post(c->port, path, "{}");
            want = c->nids ? (r.status == 409 ? 409 : 200) : 404;
        }
        c->lat[i] = mono() - t0;
        c->answered += r.status > 0;
        c->refused += r.status == 429;
        c->bad_answers += r.status != want && r.status != 429;
        if (r.status != want && r.status != 429)
            fprintf(stderr, "load: client %d request %d (kind %d): %d, expected %d: %.200s\n", c->client, i, kind,
                    r.status, want, r.body ? r.body : "");
        free(r.body);
    }
    return NULL;
}

static long rss_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

START_TEST(test_load) {
    tu_make_tmpdir("serve");
    const char *args[] = {"--model", MODEL, NULL};
    Served s = serve_start(mala_bin(), tp("log"), args);
    ck_assert(s.port > 0);
    // warm-up: the arenas of a batch of 1 and the page, so that memory before is the steady state
    HttpReply r = http_post(s.port, "/sdapi/v1/txt2img", "{\"prompt\":\"Bag\",\"steps\":4}");
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    long before = rss_kb(s.pid);
    LoadClient c[LOAD_CLIENTS];
    pthread_t th[LOAD_CLIENTS];
    double t0 = mono();
    for (int k = 0; k < LOAD_CLIENTS; k++) {
        memset(&c[k], 0, sizeof c[k]);
        c[k].port = s.port;
        c[k].client = k;
        pthread_create(&th[k], NULL, load_client, &c[k]);
    }
    for (int k = 0; k < LOAD_CLIENTS; k++) pthread_join(th[k], NULL);
    double wall = mono() - t0;
    // every accepted job reaches an end, once: ids unique, each readable in a final state
    int answered = 0, images = 0, refused = 0, bad = 0, jobs = 0;
    double lat[LOAD_CLIENTS * LOAD_PER_CLIENT];
    for (int k = 0; k < LOAD_CLIENTS; k++) {
        answered += c[k].answered, images += c[k].images, refused += c[k].refused, bad += c[k].bad_answers;
        memcpy(lat + k * LOAD_PER_CLIENT, c[k].lat, sizeof c[k].lat);
        for (int i = 0; i < c[k].nids; i++) {
            jobs++;
            for (int k2 = 0; k2 <= k; k2++)
                for (int i2 = 0; i2 < (k2 == k ? i : c[k2].nids); i2++) ck_assert(strcmp(c[k].ids[i], c[k2].ids[i2]));
            char path[128];
            snprintf(path, sizeof path, "/mala/v1/jobs/%s", c[k].ids[i]);
            for (int t = 0;; t++) {
                r = http_get(s.port, path);
                ck_assert_int_eq(r.status, 200);
                int end = strstr(r.body, "\"state\":\"done\"") || strstr(r.body, "\"state\":\"cancelled\"");
                images += strstr(r.body, "\"state\":\"done\"") ? 1 : 0;
                free(r.body);
                if (end) break;
                ck_assert_msg(t < 1200, "job %s never finished", c[k].ids[i]);
                usleep(50000);
            }
        }
    }
    double all = mono() - t0;
    long after = rss_kb(s.pid);
    r = http_get(s.port, "/health");  // still up
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    int sync = 0;
    for (int k = 0; k < LOAD_CLIENTS; k++) sync += c[k].images;
    r = http_get(s.port, "/metrics");
    char want[64];  // every job ended once: the async ones, the answered txt2img and the warm-up
    snprintf(want, sizeof want, "mala_jobs_total %d\n", jobs + sync + 1);
    ck_assert_msg(r.status == 200 && strstr(r.body, want), "metrics lack '%s': %s", want, r.body);
    free(r.body);
    ck_assert_int_eq(answered, LOAD_CLIENTS * LOAD_PER_CLIENT);
    ck_assert_msg(bad == 0, "%d requests got another answer than expected", bad);
    qsort(lat, LOAD_CLIENTS * LOAD_PER_CLIENT, sizeof *lat, cmp_double);
    printf("load: %d clients, %d requests in %.2f s (%.1f requests/s), latency p50 %.1f ms p99 %.1f ms; %d images "
           "(%.2f images/s over %.2f s with the jobs' ends); %d answered 429; RSS %ld -> %ld KiB\n",
           LOAD_CLIENTS, LOAD_CLIENTS * LOAD_PER_CLIENT, wall, LOAD_CLIENTS * LOAD_PER_CLIENT / wall,
           lat[LOAD_CLIENTS * LOAD_PER_CLIENT / 2] * 1e3, lat[LOAD_CLIENTS * LOAD_PER_CLIENT * 99 / 100] * 1e3, images,
           images / all, all, refused, before, after);
    // memory after the load within 64 MiB of before: the finished jobs kept (each a few PNGs) and
    // the allocator's free lists, not a leak growing with the requests
#if defined(__SANITIZE_ADDRESS__)
    // (under AddressSanitizer freed memory waits in its quarantine, so RSS is no measure; its leak
    // check at the server's exit is)
    (void)before, (void)after;
#else
    ck_assert_msg(after - before < 64 * 1024, "RSS grew from %ld to %ld KiB", before, after);
#endif
    ck_assert_int_eq(serve_stop(&s), 0);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("serve");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_base64);
    tcase_add_test(tc, test_request_parse);
#ifdef MALA_SERVE
    tcase_add_test(tc, test_generate_and_bytes);
    tcase_add_test(tc, test_model_kinds);
    tcase_add_test(tc, test_jobs_queue_shutdown);
    tcase_add_test(tc, test_api_key);
    tcase_add_test(tc, test_load);
#else
    printf("SKIP test_serve's server cases: this build has no libmicrohttpd (mala serve is off)\n");
#endif
    suite_add_tcase(s, tc);
    return tu_run(s);
}
