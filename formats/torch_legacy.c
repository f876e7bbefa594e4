// defines: torch_file_open, torch_file_open_mem, torch_file_is_zip, torch_file_name, torch_file_weights, torch_file_arg,
//          torch_file_arg_int,
//          torch_legacy_open, torch_legacy_open_mem, torch_legacy_close, torch_legacy_count,
//          torch_legacy_tensor, torch_legacy_find, torch_tensor_numel, torch_legacy_read_f32,
//          torch_legacy_serialize, torch_legacy_save
#include "formats/torch_legacy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/atomic_file.h"  // defines: atomic_write_file
#include "core/half.h"         // defines: half_to_f32, bf16_to_f32
#include "formats/zip_dir.h"    // defines: zip_open_mem, zip_entry_data, zip_close

// The magic number pickled as LONG1: little-endian bytes of 0x1950a86a20f9469cfc6c.
static const unsigned char kMagic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
#define TL_PROTOCOL_VERSION 1001
#define TL_MAX_MEMO (1u << 22)  // refuse absurd memo indices instead of allocating for them

static const struct { const char *name; int size, is_float; } kStorage[] = {
    {"FloatStorage", 4, 1}, {"DoubleStorage", 8, 1}, {"HalfStorage", 2, 1}, {"BFloat16Storage", 2, 1},
    {"LongStorage", 8, 0},  {"IntStorage", 4, 0},    {"ShortStorage", 2, 0}, {"CharStorage", 1, 0},
    {"ByteStorage", 1, 0},  {"BoolStorage", 1, 0},
};
#define N_STORAGE_TYPES ((int)(sizeof kStorage / sizeof kStorage[0]))

// ---------------------------------------------------------------------------------------------
// Pickle objects: just enough of Python's data model for state dicts. All objects of one file
// live on one allocation list and are freed together.
// ---------------------------------------------------------------------------------------------
typedef enum {
    PO_NONE, PO_BOOL, PO_INT, PO_BIGINT, PO_FLOAT, PO_STR, PO_BYTES, PO_TUPLE, PO_LIST, PO_DICT,
    PO_GLOBAL, PO_STORAGE, PO_TENSOR, PO_OBJECT
} PoType;

static const char *po_name(PoType t) {
    static const char *names[] = {"None", "bool", "int", "int", "float", "str", "bytes", "tuple", "list",
                                  "dict", "global", "storage", "tensor", "object"};
    return names[t];
}

typedef struct PObj PObj;
struct PObj {
    PoType type;
    PObj *next;                // allocation list
    int64_t i;                 // INT / BOOL value; STORAGE: index of its root storage
    double f;                  // FLOAT
    char *s;                   // STR / BYTES / BIGINT bytes / GLOBAL "module.name" (NUL-terminated)
    size_t slen;
    PObj **items;              // TUPLE / LIST items; DICT key,value pairs
    int n, cap;                // items in use (DICT: 2 per entry)
    int64_t view_off, view_numel;  // STORAGE: the view's first element in its root and its length
    PObj *storage;             // TENSOR; OBJECT: its BUILD state (a record's fields)
    int64_t offset;
    int ndim;
    int64_t shape[TL_MAX_DIMS], stride[TL_MAX_DIMS];
};

typedef struct {
    char *key;
    int type;                  // index into kStorage
    int64_t numel;
    const unsigned char *data; // NULL until the data section is read
} Root;

struct TorchLegacy {
    char *name;
    const unsigned char *p;
    size_t len;
    void *map;                 // mmap'ed file (NULL for open_mem)
    PObj *objs;
    Root *roots;
    int nroots, roots_cap;
    TorchTensor *tensors;
    int ntensors;
    int is_zip;
    Zip zip;                   // zip format: the archive's directory
    char *prefix;              // zip format: "<top folder>/"
    const char *weights;       // the sub-dict the tensors come from (NULL: the top-level dict)
    char want[32];             // the sub-dict asked for ("" for the default order)
    PObj *top;                 // the saved object
};

typedef struct {
    TorchLegacy *tl;
    const unsigned char *p;    // the pickle being run (the whole file, or a zip's data.pkl)
    size_t len;
    size_t pos;
    PObj **stack;
    int sp, scap;
    int *marks;
    int mp, mcap;
    PObj **memo;
    size_t memo_cap, memo_count;
    MalaErr *err;
    int failed;
} Vm;

static int vm_fail(Vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vm_fail(Vm *vm, const char *fmt, ...) {
    if (vm->failed) return -1;
    vm->failed = 1;
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mala_errf(vm->err, "%s: %s", vm->tl->name, what);
}

static PObj *po_new(Vm *vm, PoType t) {
    PObj *o = xcalloc(1, sizeof *o);
    o->type = t;
    o->next = vm->tl->objs;
    vm->tl->objs = o;
    return o;
}

static void po_append(PObj *o, PObj *item) {
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 8;
        PObj **p = realloc(o->items, (size_t)o->cap * sizeof *p);
        if (!p) FATAL("out of memory reading a torch file");
        o->items = p;
    }
    o->items[o->n++] = item;
}

static void po_free_all(PObj *o) {
    while (o) {
        PObj *next = o->next;
        free(o->s);
        free(o->items);
        free(o);
        o = next;
    }
}

static int str_eq(const PObj *o, const char *s) { return o && o->type == PO_STR && strcmp(o->s, s) == 0; }

static const PObj *dict_get(const PObj *d, const char *key) {
    if (!d || d->type != PO_DICT) return NULL;
    for (int k = 0; k + 1 < d->n; k += 2)
        if (str_eq(d->items[k], key)) return d->items[k + 1];
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// The pickle machine
// ---------------------------------------------------------------------------------------------
static int need(Vm *vm, size_t n) {
    if (vm->failed) return -1;
    if (n > vm->len - vm->pos)
        return vm_fail(vm, "truncated: needs %zu more bytes at byte %zu but the file has %zu", n, vm->pos,
                       vm->len);
    return 0;
}
static uint64_t rd_le(Vm *vm, int n) {
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--) v = (v << 8) | vm->p[vm->pos + k];
    vm->pos += n;
    return v;
}

static void push(Vm *vm, PObj *o) {
    if (vm->sp == vm->scap) {
        vm->scap = vm->scap ? 2 * vm->scap : 64;
        PObj **s = realloc(vm->stack, (size_t)vm->scap * sizeof *s);
        if (!s) FATAL("out of memory reading a torch file");
        vm->stack = s;
    }
    vm->stack[vm->sp++] = o;
}
static int floor_sp(Vm *vm) { return vm->mp ? vm->marks[vm->mp - 1] : 0; }
static PObj *pop(Vm *vm) {
    if (vm->sp <= floor_sp(vm)) { vm_fail(vm, "malformed pickle: stack underflow at byte %zu", vm->pos); return NULL; }
    return vm->stack[--vm->sp];
}
static PObj *top(Vm *vm) {
    if (vm->sp <= floor_sp(vm)) { vm_fail(vm, "malformed pickle: empty stack at byte %zu", vm->pos); return NULL; }
    return vm->stack[vm->sp - 1];
}
static int push_mark(Vm *vm) {
    if (vm->mp == vm->mcap) {
        vm->mcap = vm->mcap ? 2 * vm->mcap : 16;
        int *m = realloc(vm->marks, (size_t)vm->mcap * sizeof *m);
        if (!m) FATAL("out of memory reading a torch file");
        vm->marks = m;
    }
    vm->marks[vm->mp++] = vm->sp;
    return 0;
}
// Pops everything above the last MARK; *items points into the stack (valid until the next push).
static int pop_mark(Vm *vm, PObj ***items, int *n) {
    if (!vm->mp) return vm_fail(vm, "malformed pickle: no MARK at byte %zu", vm->pos);
    int k = vm->marks[--vm->mp];
    *n = vm->sp - k;
    *items = *n ? vm->stack + k : NULL;  // the stack may not exist yet (NULL + 0 is undefined)
    vm->sp = k;
    return 0;
}

static int memo_put(Vm *vm, uint64_t idx) {
    PObj *o = top(vm);
    if (!o) return -1;
    if (idx >= TL_MAX_MEMO) return vm_fail(vm, "malformed pickle: memo index %llu", (unsigned long long)idx);
    if (idx >= vm->memo_cap) {
        size_t cap = vm->memo_cap ? vm->memo_cap : 256;
        while (cap <= idx) cap *= 2;
        PObj **m = realloc(vm->memo, cap * sizeof *m);
        if (!m) FATAL("out of memory reading a torch file");
        memset(m + vm->memo_cap, 0, (cap - vm->memo_cap) * sizeof *m);
        vm->memo = m;
        vm->memo_cap = cap;
    }
    if (!vm->memo[idx]) vm->memo_count++;
    vm->memo[idx] = o;
    return 0;
}
static int memo_get(Vm *vm, uint64_t idx) {
    if (idx >= vm->memo_cap || !vm->memo[idx])
        return vm_fail(vm, "malformed pickle: memo entry %llu unset at byte %zu", (unsigned long long)idx, vm->pos);
    push(vm, vm->memo[idx]);
    return 0;
}

static PObj *new_str(Vm *vm, PoType t, size_t n) {
    if (need(vm, n)) return NULL;
    PObj *o = po_new(vm, t);
    o->s = xmalloc(n + 1);
    memcpy(o->s, vm->p + vm->pos, n);
    o->s[n] = 0;
    o->slen = n;
    vm->pos += n;
    return o;
}

static PObj *new_int(Vm *vm, int64_t v) {
    PObj *o = po_new(vm, PO_INT);
    o->i = v;
    return o;
}

// LONG1 / LONG4: little-endian two's complement of n bytes.
static PObj *new_long(Vm *vm, size_t n) {
    if (n > 8) return new_str(vm, PO_BIGINT, n);
    if (need(vm, n)) return NULL;
    uint64_t v = n ? rd_le(vm, (int)n) : 0;
    if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~0ull << (8 * n);
    return new_int(vm, (int64_t)v);
}

static PObj *new_seq(Vm *vm, PoType t, PObj **items, int n) {
    PObj *o = po_new(vm, t);
    for (int k = 0; k < n; k++) po_append(o, items[k]);
    return o;
}

// A line of a GLOBAL opcode, without its newline.
static int read_line(Vm *vm, char *out, size_t cap) {
    size_t k = 0;
    for (;;) {
        if (need(vm, 1)) return -1;
        unsigned char c = vm->p[vm->pos++];
        if (c == '\n') break;
        if (k + 1 >= cap) return vm_fail(vm, "malformed pickle: GLOBAL name too long at byte %zu", vm->pos);
        out[k++] = (char)c;
    }
    out[k] = 0;
    return 0;
}

static PObj *new_global(Vm *vm, const char *module, const char *name) {
    PObj *o = po_new(vm, PO_GLOBAL);
    size_t n = strlen(module) + strlen(name) + 2;
    o->s = xmalloc(n);
    snprintf(o->s, n, "%s.%s", module, name);
    o->slen = n - 1;
    return o;
}

static int dict_set(Vm *vm, PObj *d, PObj *k, PObj *v) {
    if (d->type == PO_OBJECT) return 0;  // e.g. state set on an opaque object: ignored
    if (d->type != PO_DICT) return vm_fail(vm, "malformed pickle: SETITEM on a %s at byte %zu", po_name(d->type), vm->pos);
    // torch never writes a key twice, so entries are appended without a duplicate search
    // (which would make hostile files quadratic)
    po_append(d, k);
    po_append(d, v);
    return 0;
}

static int list_append(Vm *vm, PObj *l, PObj *v) {
    if (l->type == PO_OBJECT) return 0;
    if (l->type != PO_LIST) return vm_fail(vm, "malformed pickle: APPEND to a %s at byte %zu", po_name(l->type), vm->pos);
    po_append(l, v);
    return 0;
}

static int find_root(TorchLegacy *tl, const char *key) {
    for (int r = 0; r < tl->nroots; r++)
        if (strcmp(tl->roots[r].key, key) == 0) return r;
    return -1;
}

// Zip format: the storage `key` is the stored member "<top>/data/<key>" of at least `bytes` bytes. Its
// bytes stay in the mapped file until a tensor is read (an optimizer's moments are never touched);
// compressed members are refused, so no declared size is ever inflated into memory.
static const unsigned char *zip_storage(Vm *vm, const char *key, int64_t bytes) {
    TorchLegacy *tl = vm->tl;
    size_t pl = strlen(tl->prefix);
    const ZipEntry *e = NULL;
    for (int i = 0; i < tl->zip.n && !e; i++) {
        const char *nm = tl->zip.e[i].name;
        if (strncmp(nm, tl->prefix, pl) == 0 && strncmp(nm + pl, "data/", 5) == 0 && strcmp(nm + pl + 5, key) == 0)
            e = &tl->zip.e[i];
    }
    if (!e) { vm_fail(vm, "storage %s has no member %sdata/%s", key, tl->prefix, key); return NULL; }
    if (e->method != 0 || (e->flags & 1)) {
        vm_fail(vm, "storage %s is compressed or encrypted (zip method %d); torch.save stores it plain", key, e->method);
        return NULL;
    }
    uint64_t off;
    MalaErr *err = vm->err;
    if (zip_entry_data(&tl->zip, e, &off, tl->name, err)) { vm->failed = 1; return NULL; }
    if ((uint64_t)bytes > e->usize) {
        vm_fail(vm, "truncated or corrupt: storage %s claims %lld bytes, its member holds %llu", key, (long long)bytes,
                (unsigned long long)e->usize);
        return NULL;
    }
    return tl->p + off;
}

// BINPERSID: ('storage', torch.XStorage, key, location, numel[, view_metadata]) -> STORAGE.
static PObj *persistent_load(Vm *vm, PObj *pid) {
    if (pid->type != PO_TUPLE || pid->n < 1 || pid->items[0]->type != PO_STR) {
        vm_fail(vm, "unsupported persistent id (a %s) at byte %zu", po_name(pid->type), vm->pos);
        return NULL;
    }
    if (str_eq(pid->items[0], "module")) return po_new(vm, PO_OBJECT);  // a pickled nn.Module class
    if (!str_eq(pid->items[0], "storage") || pid->n < 5) {
        vm_fail(vm, "unsupported persistent id '%s' at byte %zu", pid->items[0]->s, vm->pos);
        return NULL;
    }
    PObj *ty = pid->items[1], *key = pid->items[2], *numel = pid->items[4];
    PObj *view = pid->n > 5 ? pid->items[5] : NULL;
    if (ty->type != PO_GLOBAL || key->type != PO_STR || numel->type != PO_INT || numel->i < 0) {
        vm_fail(vm, "malformed storage id at byte %zu", vm->pos);
        return NULL;
    }
    const char *tname = strncmp(ty->s, "torch.", 6) == 0 ? ty->s + 6 : ty->s;
    int type = -1;
    for (int k = 0; k < N_STORAGE_TYPES; k++)
        if (strcmp(tname, kStorage[k].name) == 0) type = k;
    if (type < 0) { vm_fail(vm, "unsupported storage type %s", ty->s); return NULL; }
    if (numel->i > (int64_t)(vm->tl->len / (size_t)kStorage[type].size)) {
        vm_fail(vm, "truncated or corrupt: storage %s claims %lld elements, more than the file's %zu bytes hold",
                key->s, (long long)numel->i, vm->tl->len);
        return NULL;
    }
    TorchLegacy *tl = vm->tl;
    int r = find_root(tl, key->s);
    if (r < 0) {
        if (tl->nroots == tl->roots_cap) {
            tl->roots_cap = tl->roots_cap ? 2 * tl->roots_cap : 64;
            Root *rs = realloc(tl->roots, (size_t)tl->roots_cap * sizeof *rs);
            if (!rs) FATAL("out of memory reading a torch file");
            tl->roots = rs;
        }
        const unsigned char *data = NULL;
        if (tl->is_zip && !(data = zip_storage(vm, key->s, numel->i * kStorage[type].size))) return NULL;
        r = tl->nroots++;
        tl->roots[r] = (Root){xstrdup(key->s), type, numel->i, data};
    } else if (tl->roots[r].type != type || tl->roots[r].numel != numel->i) {
        vm_fail(vm, "storage %s is declared twice with different types or sizes", key->s);
        return NULL;
    }
    PObj *st = po_new(vm, PO_STORAGE);
    st->i = r;
    st->view_off = 0;
    st->view_numel = numel->i;
    if (view && view->type != PO_NONE) {
        // (view_key, offset, size) in elements of the root storage
        if (view->type != PO_TUPLE || view->n != 3 || view->items[1]->type != PO_INT ||
            view->items[2]->type != PO_INT || view->items[1]->i < 0 || view->items[2]->i < 0 ||
            view->items[1]->i > numel->i || view->items[2]->i > numel->i - view->items[1]->i) {
            vm_fail(vm, "malformed storage view of %s", key->s);
            return NULL;
        }
        st->view_off = view->items[1]->i;
        st->view_numel = view->items[2]->i;
    }
    return st;
}

static int int_tuple(const PObj *t, int64_t *out, int *n) {
    if (t->type != PO_TUPLE || t->n > TL_MAX_DIMS) return -1;
    for (int k = 0; k < t->n; k++) {
        if (t->items[k]->type != PO_INT || t->items[k]->i < 0) return -1;
        out[k] = t->items[k]->i;
    }
    *n = t->n;
    return 0;
}

// REDUCE / NEWOBJ: the callables a state dict needs; anything else becomes an opaque object.
static PObj *reduce(Vm *vm, PObj *fn, PObj *args, int newobj) {
    if (fn->type != PO_GLOBAL) {
        vm_fail(vm, "malformed pickle: REDUCE on a %s at byte %zu", po_name(fn->type), vm->pos);
        return NULL;
    }
    if (strcmp(fn->s, "collections.OrderedDict") == 0 || strcmp(fn->s, "builtins.dict") == 0)
        return po_new(vm, PO_DICT);
    if (strcmp(fn->s, "torch._utils._rebuild_tensor_v2") == 0 || strcmp(fn->s, "torch._utils._rebuild_tensor") == 0) {
        int nd = 0, ns = 0;
        PObj *t = po_new(vm, PO_TENSOR);
        if (args->type != PO_TUPLE || args->n < 4 || args->items[0]->type != PO_STORAGE ||
            args->items[1]->type != PO_INT || args->items[1]->i < 0 || int_tuple(args->items[2], t->shape, &nd) ||
            int_tuple(args->items[3], t->stride, &ns) || nd != ns) {
            vm_fail(vm, "malformed tensor record at byte %zu", vm->pos);
            return NULL;
        }
        t->storage = args->items[0];
        t->offset = args->items[1]->i;
        t->ndim = nd;
        return t;
    }
    if (strcmp(fn->s, "torch._utils._rebuild_parameter") == 0 && args->type == PO_TUPLE && args->n >= 1 &&
        args->items[0]->type == PO_TENSOR)
        return args->items[0];
    // NEWOBJ (cls.__new__(cls), e.g. argparse.Namespace) makes an opaque record whose BUILD state can
    // be read; nothing is constructed. REDUCE would call the global (os.system, eval, ...): refused.
    if (!newobj) {
        vm_fail(vm, "refuses to call %s (only tensors, dicts and OrderedDicts are rebuilt; nothing is executed)", fn->s);
        return NULL;
    }
    PObj *o = po_new(vm, PO_OBJECT);
    o->s = xstrdup(fn->s);
    return o;
}

// Runs one pickle from vm->pos to its STOP; returns the result (NULL with the error set).
static PObj *vm_run(Vm *vm) {
    vm->sp = vm->mp = 0;
    if (vm->memo) memset(vm->memo, 0, vm->memo_cap * sizeof *vm->memo);
    vm->memo_count = 0;
    for (;;) {
        if (need(vm, 1)) return NULL;
        size_t at = vm->pos;
        unsigned char op = vm->p[vm->pos++];
        PObj *o = NULL, *a, *b, **items = NULL;
        int n = 0;
        switch (op) {
        case 0x80:  // PROTO
            if (need(vm, 1)) return NULL;
            if (vm->p[vm->pos] > 5) { vm_fail(vm, "unsupported pickle protocol %d", vm->p[vm->pos]); return NULL; }
            vm->pos++;
            break;
        case 0x95:  // FRAME
            if (need(vm, 8)) return NULL;
            vm->pos += 8;
            break;
        case '.':  // STOP
            if (!(o = pop(vm))) return NULL;
            return o;
        case 'N': push(vm, po_new(vm, PO_NONE)); break;
        case 0x88: case 0x89:  // NEWTRUE / NEWFALSE
            o = po_new(vm, PO_BOOL);
            o->i = op == 0x88;
            push(vm, o);
            break;
        case 'J':  // BININT
            if (need(vm, 4)) return NULL;
            push(vm, new_int(vm, (int32_t)(uint32_t)rd_le(vm, 4)));
            break;
        case 'K':  // BININT1
            if (need(vm, 1)) return NULL;
            push(vm, new_int(vm, (int64_t)rd_le(vm, 1)));
            break;
        case 'M':  // BININT2
            if (need(vm, 2)) return NULL;
            push(vm, new_int(vm, (int64_t)rd_le(vm, 2)));
            break;
        case 0x8a:  // LONG1
            if (need(vm, 1)) return NULL;
            if (!(o = new_long(vm, (size_t)rd_le(vm, 1)))) return NULL;
            push(vm, o);
            break;
        case 0x8b: {  // LONG4
            if (need(vm, 4)) return NULL;
            int32_t len = (int32_t)(uint32_t)rd_le(vm, 4);
            if (len < 0) { vm_fail(vm, "malformed pickle: negative LONG4 length"); return NULL; }
            if (!(o = new_long(vm, (size_t)len))) return NULL;
            push(vm, o);
            break;
        }
        case 'G': {  // BINFLOAT (big-endian)
            if (need(vm, 8)) return NULL;
            uint64_t v = 0;
            for (int k = 0; k < 8; k++) v = (v << 8) | vm->p[vm->pos + k];
            vm->pos += 8;
            o = po_new(vm, PO_FLOAT);
            memcpy(&o->f, &v, 8);
            push(vm, o);
            break;
        }
        case 'X': case 'T': case 'B':  // BINUNICODE, BINSTRING, BINBYTES (4-byte length)
            if (need(vm, 4)) return NULL;
            if (!(o = new_str(vm, op == 'B' ? PO_BYTES : PO_STR, (size_t)rd_le(vm, 4)))) return NULL;
            push(vm, o);
            break;
        case 0x8c: case 'U': case 'C':  // SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
            if (need(vm, 1)) return NULL;
            if (!(o = new_str(vm, op == 'C' ? PO_BYTES : PO_STR, (size_t)rd_le(vm, 1)))) return NULL;
            push(vm, o);
            break;
        case 0x8d: case 0x8e: {  // BINUNICODE8, BINBYTES8
            if (need(vm, 8)) return NULL;
            uint64_t len = rd_le(vm, 8);
            if (len > vm->len) { need(vm, vm->len + 1); return NULL; }
            if (!(o = new_str(vm, op == 0x8d ? PO_STR : PO_BYTES, (size_t)len))) return NULL;
            push(vm, o);
            break;
        }
        case '}': push(vm, po_new(vm, PO_DICT)); break;
        case ']': push(vm, po_new(vm, PO_LIST)); break;
        case ')': push(vm, po_new(vm, PO_TUPLE)); break;
        case '(': push_mark(vm); break;
        case 't': case 'l': case 'd':  // TUPLE, LIST, DICT
            if (pop_mark(vm, &items, &n)) return NULL;
            if (op == 'd') {
                if (n % 2) { vm_fail(vm, "malformed pickle: odd DICT at byte %zu", at); return NULL; }
                o = po_new(vm, PO_DICT);
                for (int k = 0; k < n; k += 2)
                    if (dict_set(vm, o, items[k], items[k + 1])) return NULL;
            } else {
                o = new_seq(vm, op == 't' ? PO_TUPLE : PO_LIST, items, n);
            }
            push(vm, o);
            break;
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
            n = op - 0x84;
            if (vm->sp - floor_sp(vm) < n) { vm_fail(vm, "malformed pickle: stack underflow at byte %zu", at); return NULL; }
            vm->sp -= n;
            push(vm, new_seq(vm, PO_TUPLE, vm->stack + vm->sp, n));
            break;
        }
        case 'a':  // APPEND
            if (!(b = pop(vm)) || !(a = top(vm)) || list_append(vm, a, b)) return NULL;
            break;
        case 'e':  // APPENDS
            if (pop_mark(vm, &items, &n) || !(a = top(vm))) return NULL;
            for (int k = 0; k < n; k++)
                if (list_append(vm, a, items[k])) return NULL;
            break;
        case 's':  // SETITEM
            if (!(b = pop(vm)) || !(a = pop(vm)) || !(o = top(vm)) || dict_set(vm, o, a, b)) return NULL;
            break;
        case 'u':  // SETITEMS
            if (pop_mark(vm, &items, &n) || !(o = top(vm))) return NULL;
            if (n % 2) { vm_fail(vm, "malformed pickle: odd SETITEMS at byte %zu", at); return NULL; }
            for (int k = 0; k < n; k += 2)
                if (dict_set(vm, o, items[k], items[k + 1])) return NULL;
            break;
        case 'q':  // BINPUT
            if (need(vm, 1) || memo_put(vm, rd_le(vm, 1))) return NULL;
            break;
        case 'r':  // LONG_BINPUT
            if (need(vm, 4) || memo_put(vm, rd_le(vm, 4))) return NULL;
            break;
        case 0x94:  // MEMOIZE
            if (memo_put(vm, vm->memo_count)) return NULL;
            break;
        case 'h':  // BINGET
            if (need(vm, 1) || memo_get(vm, rd_le(vm, 1))) return NULL;
            break;
        case 'j':  // LONG_BINGET
            if (need(vm, 4) || memo_get(vm, rd_le(vm, 4))) return NULL;
            break;
        case 'c': {  // GLOBAL "module\nname\n"
            char module[256], name[256];
            if (read_line(vm, module, sizeof module) || read_line(vm, name, sizeof name)) return NULL;
            push(vm, new_global(vm, module, name));
            break;
        }
        case 0x93:  // STACK_GLOBAL
            if (!(b = pop(vm)) || !(a = pop(vm))) return NULL;
            if (a->type != PO_STR || b->type != PO_STR) { vm_fail(vm, "malformed pickle: STACK_GLOBAL at byte %zu", at); return NULL; }
            push(vm, new_global(vm, a->s, b->s));
            break;
        case 'Q':  // BINPERSID
            if (!(a = pop(vm)) || !(o = persistent_load(vm, a))) return NULL;
            push(vm, o);
            break;
        case 'R': case 0x81:  // REDUCE, NEWOBJ
            if (!(b = pop(vm)) || !(a = pop(vm)) || !(o = reduce(vm, a, b, op == 0x81))) return NULL;
            push(vm, o);
            break;
        case 'b':  // BUILD: state on top of the object; state dicts only carry _metadata there
            if (!(b = pop(vm)) || !(a = top(vm))) return NULL;
            if (a->type == PO_OBJECT && b->type == PO_DICT) a->storage = b;
            break;
        case '0':  // POP
            if (vm->sp > floor_sp(vm)) vm->sp--;
            else if (pop_mark(vm, &items, &n)) return NULL;
            break;
        case '1':  // POP_MARK
            if (pop_mark(vm, &items, &n)) return NULL;
            break;
        case '2':  // DUP
            if (!(a = top(vm))) return NULL;
            push(vm, a);
            break;
        default:
            vm_fail(vm, "unsupported pickle opcode 0x%02x at byte %zu (not a state dict written by torch.save?)", op, at);
            return NULL;
        }
        if (vm->failed) return NULL;
    }
}

// ---------------------------------------------------------------------------------------------
// File structure
// ---------------------------------------------------------------------------------------------
static int mul_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }

// Zip format (torch.save since PyTorch 1.6): "<top>/data.pkl" is the object, "<top>/data/<key>" each
// storage's raw little-endian bytes, "<top>/byteorder" (if present) "little". Points vm at data.pkl.
static int zip_pickle(TorchLegacy *tl, Vm *vm, MalaErr *err) {
    if (zip_open_mem(tl->p, tl->len, tl->name, &tl->zip, err)) return -1;
    const ZipEntry *pkl = NULL, *order = NULL;
    for (int i = 0; i < tl->zip.n; i++) {
        const char *nm = tl->zip.e[i].name, *slash = strchr(nm, '/');
        if (slash && strcmp(slash + 1, "data.pkl") == 0 && !pkl) {
            pkl = &tl->zip.e[i];
            tl->prefix = xmalloc((size_t)(slash - nm) + 2);
            memcpy(tl->prefix, nm, (size_t)(slash - nm) + 1);
            tl->prefix[slash - nm + 1] = 0;
        }
    }
    if (!pkl) return mala_errf(err, "%s: a zip archive without <folder>/data.pkl (not written by torch.save)", tl->name);
    for (int i = 0; i < tl->zip.n; i++) {
        const char *nm = tl->zip.e[i].name;
        if (strncmp(nm, tl->prefix, strlen(tl->prefix)) == 0 && strcmp(nm + strlen(tl->prefix), "byteorder") == 0)
            order = &tl->zip.e[i];
    }
    uint64_t off;
    if (order) {
        if (order->method != 0 || zip_entry_data(&tl->zip, order, &off, tl->name, err)) {
            if (order->method != 0) mala_errf(err, "%s: compressed byteorder member", tl->name);
            return -1;
        }
        if (order->usize != 6 || memcmp(tl->p + off, "little", 6) != 0)
            return mala_errf(err, "%s: big-endian torch files are not supported", tl->name);
    }
    if (pkl->method != 0 || (pkl->flags & 1))
        return mala_errf(err, "%s: %sdata.pkl is compressed or encrypted (zip method %d); torch.save stores it plain",
                         tl->name, tl->prefix, pkl->method);
    if (zip_entry_data(&tl->zip, pkl, &off, tl->name, err)) return -1;
    tl->is_zip = 1;
    vm->p = tl->p + off;
    vm->len = (size_t)pkl->usize;
    vm->pos = 0;
    return 0;
}

static int dict_has_tensor(const PObj *d) {
    for (int k = 0; k + 1 < d->n; k += 2)
        if (d->items[k + 1]->type == PO_TENSOR) return 1;
    return 0;
}

// A training checkpoint ({model, ema, opt, args}) keeps its weights in a sub-dict: `ema` first, as
// DiT's find_model does, then `model`, then `state_dict`; tl->weights names an explicit choice.
static int pick_weights(TorchLegacy *tl, PObj **obj, MalaErr *err) {
    if (tl->want[0]) tl->weights = tl->want;
    if (!tl->weights && dict_has_tensor(*obj)) return 0;
    static const char *order[] = {"ema", "model", "state_dict"};
    for (int k = 0; k < 3; k++) {
        const char *w = tl->weights ? tl->weights : order[k];
        const PObj *d = dict_get(*obj, w);
        if (d && d->type == PO_DICT) {
            *obj = (PObj *)d;
            tl->weights = w;
            return 0;
        }
        if (tl->weights) return mala_errf(err, "%s: no '%s' weights in this checkpoint", tl->name, w);
    }
    return 0;  // a dict without tensors: zero tensors, the caller says what it missed
}

static int parse(TorchLegacy *tl, MalaErr *err) {
    Vm vm = {.tl = tl, .err = err, .p = tl->p, .len = tl->len};
    int rc = -1;
    PObj *obj = NULL;
    if (tl->len >= 4 && memcmp(tl->p, "PK\x03\x04", 4) == 0) {
        if (zip_pickle(tl, &vm, err)) goto done;
        if (!(obj = vm_run(&vm))) goto done;
        goto tensors;
    }
    if (tl->len == 0 || tl->p[0] != 0x80) {
        mala_errf(err, "%s: not a legacy torch file (%s)", tl->name, tl->len ? "does not start with a pickle" : "empty file");
        goto done;
    }
    PObj *magic = vm_run(&vm);
    if (!magic) goto done;
    if (magic->type != PO_BIGINT || magic->slen != sizeof kMagic || memcmp(magic->s, kMagic, sizeof kMagic)) {
        mala_errf(err, "%s: not a legacy torch file (bad magic number)", tl->name);
        goto done;
    }
    PObj *proto = vm_run(&vm);
    if (!proto) goto done;
    if (proto->type != PO_INT || proto->i != TL_PROTOCOL_VERSION) {
        mala_errf(err, "%s: unsupported torch protocol version (expected %d)", tl->name, TL_PROTOCOL_VERSION);
        goto done;
    }
    PObj *sys_info = vm_run(&vm);
    if (!sys_info) goto done;
    const PObj *le = dict_get(sys_info, "little_endian");
    if (sys_info->type != PO_DICT || (le && le->type == PO_BOOL && !le->i)) {
        mala_errf(err, "%s: %s", tl->name, sys_info->type != PO_DICT ? "malformed sys_info record" : "big-endian torch files are not supported");
        goto done;
    }
    obj = vm_run(&vm);
    if (!obj) goto done;
    if (obj->type != PO_DICT) {
        mala_errf(err, "%s: the saved object is a %s%s%s, not a state dict", tl->name, po_name(obj->type),
                  obj->s ? " " : "", obj->s ? obj->s : "");
        goto done;
    }
    PObj *keys = vm_run(&vm);
    if (!keys) goto done;
    if (keys->type != PO_LIST) { mala_errf(err, "%s: malformed storage key list", tl->name); goto done; }

    // Storage data: per key in list order an int64 element count and the elements.
    size_t pos = vm.pos;
    for (int k = 0; k < keys->n; k++) {
        const PObj *key = keys->items[k];
        int r = key->type == PO_STR ? find_root(tl, key->s) : -1;
        if (r < 0) { mala_errf(err, "%s: storage key list names an unknown storage", tl->name); goto done; }
        Root *root = &tl->roots[r];
        if (root->data) { mala_errf(err, "%s: storage %s listed twice", tl->name, root->key); goto done; }
        if (tl->len - pos < 8) {
            mala_errf(err, "%s: truncated: storage %d of %d (%s) starts past the end of the file (%zu bytes)",
                      tl->name, k + 1, keys->n, root->key, tl->len);
            goto done;
        }
        uint64_t count = 0;
        for (int b = 7; b >= 0; b--) count = (count << 8) | tl->p[pos + b];
        if (count != (uint64_t)root->numel) {
            mala_errf(err, "%s: storage %s holds %llu elements, its record says %lld", tl->name, root->key,
                      (unsigned long long)count, (long long)root->numel);
            goto done;
        }
        size_t bytes = (size_t)root->numel * (size_t)kStorage[root->type].size;
        if (tl->len - pos - 8 < bytes) {
            mala_errf(err, "%s: truncated: storage %d of %d (%s) needs %zu bytes at byte %zu, the file has %zu",
                      tl->name, k + 1, keys->n, root->key, bytes, pos + 8, tl->len);
            goto done;
        }
        root->data = tl->p + pos + 8;
        pos += 8 + bytes;
    }
    for (int r = 0; r < tl->nroots; r++)
        if (!tl->roots[r].data) { mala_errf(err, "%s: storage %s has no data", tl->name, tl->roots[r].key); goto done; }

tensors:
    if (obj->type != PO_DICT) {
        mala_errf(err, "%s: the saved object is a %s%s%s, not a state dict", tl->name, po_name(obj->type),
                  obj->s ? " " : "", obj->s ? obj->s : "");
        goto done;
    }
    tl->top = obj;
    if (pick_weights(tl, &obj, err)) goto done;
    // Tensors of the chosen dict.
    tl->tensors = xcalloc((size_t)obj->n / 2 + 1, sizeof *tl->tensors);
    for (int k = 0; k + 1 < obj->n; k += 2) {
        const PObj *key = obj->items[k], *val = obj->items[k + 1];
        if (val->type != PO_TENSOR) continue;
        if (key->type != PO_STR) { mala_errf(err, "%s: a tensor with a non-string key", tl->name); goto done; }
        const PObj *st = val->storage;
        const Root *root = &tl->roots[st->i];
        TorchTensor *x = &tl->tensors[tl->ntensors++];
        x->name = key->s;
        x->storage_type = kStorage[root->type].name;
        x->elem_size = kStorage[root->type].size;
        x->is_float = kStorage[root->type].is_float;
        x->ndim = val->ndim;
        x->offset = val->offset;
        x->storage_key = root->key;
        x->storage_numel = st->view_numel;
        x->storage = root->data + (size_t)st->view_off * (size_t)x->elem_size;
        // Every element must lie inside the storage: offset + sum (shape-1) * stride < numel.
        int64_t last = val->offset, numel = 1;
        for (int d = 0; d < val->ndim; d++) {
            x->shape[d] = val->shape[d];
            x->stride[d] = val->stride[d];
            int64_t ext;
            if (!mul_ok(numel, val->shape[d], &numel) ||
                (val->shape[d] > 0 && (!mul_ok(val->shape[d] - 1, val->stride[d], &ext) ||
                                      __builtin_add_overflow(last, ext, &last)))) {
                mala_errf(err, "%s: tensor '%s' has an absurd shape", tl->name, x->name);
                goto done;
            }
        }
        if (numel > 0 && last >= st->view_numel) {
            mala_errf(err, "%s: tensor '%s' reaches element %lld of a %lld-element storage", tl->name, x->name,
                      (long long)last, (long long)st->view_numel);
            goto done;
        }
    }
    rc = 0;
done:
    free(vm.stack);
    free(vm.marks);
    free(vm.memo);
    return rc;
}

static TorchLegacy *open_common(TorchLegacy *tl, MalaErr *err) {
    if (parse(tl, err)) {
        torch_legacy_close(tl);
        return NULL;
    }
    return tl;
}

static void set_want(TorchLegacy *tl, const char *weights) {
    snprintf(tl->want, sizeof tl->want, "%s", weights ? weights : "");
}

TorchLegacy *torch_file_open_mem(const void *buf, size_t len, const char *name, const char *weights, MalaErr *err) {
    TorchLegacy *tl = xcalloc(1, sizeof *tl);
    set_want(tl, weights);
    tl->name = xstrdup(name ? name : "<memory>");
    tl->p = buf;
    tl->len = len;
    return open_common(tl, err);
}

TorchLegacy *torch_file_open(const char *path, const char *weights, MalaErr *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { mala_errf(err, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        mala_errf(err, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    TorchLegacy *tl = xcalloc(1, sizeof *tl);
    set_want(tl, weights);
    tl->name = xstrdup(path);
    tl->len = (size_t)sb.st_size;
    if (tl->len) {
        void *m = mmap(NULL, tl->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            mala_errf(err, "%s: cannot map: %s", path, strerror(errno));
            close(fd);
            free(tl->name);
            free(tl);
            return NULL;
        }
        tl->map = m;
        tl->p = m;
    } else {
        tl->p = (const unsigned char *)"";
    }
    close(fd);
    return open_common(tl, err);
}

TorchLegacy *torch_legacy_open_mem(const void *buf, size_t len, const char *name, MalaErr *err) {
    return torch_file_open_mem(buf, len, name, NULL, err);
}
TorchLegacy *torch_legacy_open(const char *path, MalaErr *err) { return torch_file_open(path, NULL, err); }

int torch_file_is_zip(const TorchLegacy *tl) { return tl->is_zip; }
const char *torch_file_name(const TorchLegacy *tl) { return tl->name; }
const char *torch_file_weights(const TorchLegacy *tl) { return tl->weights; }

const char *torch_file_arg(const TorchLegacy *tl, const char *field) {
    const PObj *args = dict_get(tl->top, "args");
    if (!args) return NULL;
    const PObj *state = args->type == PO_OBJECT ? args->storage : args->type == PO_DICT ? args : NULL;
    const PObj *v = dict_get(state, field);
    return v && v->type == PO_STR ? v->s : NULL;
}

int torch_file_arg_int(const TorchLegacy *tl, const char *field, int64_t *v) {
    const PObj *args = dict_get(tl->top, "args");
    if (!args) return -1;
    const PObj *state = args->type == PO_OBJECT ? args->storage : args->type == PO_DICT ? args : NULL;
    const PObj *x = dict_get(state, field);
    if (!x || x->type != PO_INT) return -1;
    *v = x->i;
    return 0;
}

void torch_legacy_close(TorchLegacy *tl) {
    if (!tl) return;
    if (tl->map) munmap(tl->map, tl->len);
    po_free_all(tl->objs);
    for (int r = 0; r < tl->nroots; r++) free(tl->roots[r].key);
    free(tl->roots);
    free(tl->tensors);
    zip_close(&tl->zip);
    free(tl->prefix);
    free(tl->name);
    free(tl);
}

int torch_legacy_count(const TorchLegacy *tl) { return tl->ntensors; }
const TorchTensor *torch_legacy_tensor(const TorchLegacy *tl, int i) {
    return i >= 0 && i < tl->ntensors ? &tl->tensors[i] : NULL;
}
const TorchTensor *torch_legacy_find(const TorchLegacy *tl, const char *name) {
    for (int i = 0; i < tl->ntensors; i++)
        if (strcmp(tl->tensors[i].name, name) == 0) return &tl->tensors[i];
    return NULL;
}
int64_t torch_tensor_numel(const TorchTensor *x) {
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
    return n;
}

static float load_elem(const unsigned char *p, const char *type) {
    switch (type[0]) {
    case 'F': { float f; memcpy(&f, p, 4); return f; }
    case 'D': { double d; memcpy(&d, p, 8); return (float)d; }
    case 'H': { uint16_t h; memcpy(&h, p, 2); return half_to_f32(h); }
    default: { uint16_t h; memcpy(&h, p, 2); return bf16_to_f32(h); }
    }
}

int torch_legacy_read_f32(const TorchLegacy *tl, const TorchTensor *x, float *out, MalaErr *err) {
    if (!x->is_float)
        return mala_errf(err, "%s: tensor '%s' is stored as %s, not floating point", tl->name, x->name, x->storage_type);
    int64_t numel = torch_tensor_numel(x);
    if (numel == 0) return 0;
    const unsigned char *base = x->storage;
    size_t es = (size_t)x->elem_size;
    int nd = x->ndim;
    if (nd == 0) { out[0] = load_elem(base + (size_t)x->offset * es, x->storage_type); return 0; }
    // Odometer over all but the last dimension; the last is a strided inner loop.
    int64_t idx[TL_MAX_DIMS] = {0}, inner = x->shape[nd - 1], is = x->stride[nd - 1], pos = x->offset;
    int fast = x->storage_type[0] == 'F' && is == 1;
    for (int64_t k = 0; k < numel; k += inner) {
        if (fast) memcpy(out + k, base + (size_t)pos * 4, (size_t)inner * 4);
        else
            for (int64_t j = 0; j < inner; j++) out[k + j] = load_elem(base + (size_t)(pos + j * is) * es, x->storage_type);
        for (int d = nd - 2; d >= 0; d--) {
            pos += x->stride[d];
            if (++idx[d] < x->shape[d]) break;
            pos -= x->stride[d] * x->shape[d];
            idx[d] = 0;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Writer: the opcodes CPython's C pickler (protocol 2) emits for torch's legacy save
// ---------------------------------------------------------------------------------------------
typedef struct {
    unsigned char *b;
    size_t len, cap;
    uint32_t memo;  // next memo index of the current pickle
} Pw;

static void pw_bytes(Pw *w, const void *p, size_t n) {
    if (w->len + n > w->cap) {
        while (w->len + n > w->cap) w->cap = w->cap ? 2 * w->cap : 4096;
        unsigned char *b = realloc(w->b, w->cap);
        if (!b) FATAL("out of memory writing a torch file");
        w->b = b;
    }
    memcpy(w->b + w->len, p, n);
    w->len += n;
}
static void pw_op(Pw *w, unsigned char op) { pw_bytes(w, &op, 1); }
static void pw_le(Pw *w, uint64_t v, int n) {
    unsigned char b[8];
    for (int k = 0; k < n; k++) b[k] = (unsigned char)(v >> (8 * k));
    pw_bytes(w, b, (size_t)n);
}
static uint32_t pw_put(Pw *w) {
    uint32_t idx = w->memo++;
    if (idx < 256) { pw_op(w, 'q'); pw_le(w, idx, 1); }
    else { pw_op(w, 'r'); pw_le(w, idx, 4); }
    return idx;
}
static void pw_get(Pw *w, uint32_t idx) {
    if (idx < 256) { pw_op(w, 'h'); pw_le(w, idx, 1); }
    else { pw_op(w, 'j'); pw_le(w, idx, 4); }
}
static void pw_begin(Pw *w) { pw_op(w, 0x80); pw_op(w, 2); w->memo = 0; }
static uint32_t pw_str(Pw *w, const char *s) {
    size_t n = strlen(s);
    pw_op(w, 'X');
    pw_le(w, n, 4);
    pw_bytes(w, s, n);
    return pw_put(w);
}
static void pw_int(Pw *w, int64_t v) {
    if (v >= 0 && v <= 0xff) { pw_op(w, 'K'); pw_le(w, (uint64_t)v, 1); }
    else if (v >= 0 && v <= 0xffff) { pw_op(w, 'M'); pw_le(w, (uint64_t)v, 2); }
    else if (v >= INT32_MIN && v <= INT32_MAX) { pw_op(w, 'J'); pw_le(w, (uint32_t)(int32_t)v, 4); }
    else {  // LONG1, minimal two's complement as pickle's encode_long (v > 0 here in practice)
        int nbytes = 1;
        while (nbytes < 8 && !(v >= -(1ll << (8 * nbytes - 1)) && v < (1ll << (8 * nbytes - 1)))) nbytes++;
        pw_op(w, 0x8a);
        pw_le(w, (uint64_t)nbytes, 1);
        pw_le(w, (uint64_t)v, nbytes);
    }
}
static void pw_global(Pw *w, const char *module, const char *name) {
    pw_op(w, 'c');
    pw_bytes(w, module, strlen(module));
    pw_op(w, '\n');
    pw_bytes(w, name, strlen(name));
    pw_op(w, '\n');
}
static void pw_int_tuple(Pw *w, const int64_t *v, int n) {
    if (n == 0) { pw_op(w, ')'); return; }  // the empty tuple is a singleton: never memoised
    if (n > 3) pw_op(w, '(');
    for (int k = 0; k < n; k++) pw_int(w, v[k]);
    pw_op(w, n > 3 ? 't' : (unsigned char)(0x84 + n));
    pw_put(w);
}

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const TorchSaveTensor *const *)a)->storage_key, (*(const TorchSaveTensor *const *)b)->storage_key);
}

int torch_legacy_serialize(const TorchSaveTensor *t, int n, unsigned char **buf, size_t *len, MalaErr *err) {
    enum { BATCH = 1000 };  // pickle's BATCHSIZE for SETITEMS / APPENDS
    for (int i = 0; i < n; i++) {
        if (t[i].ndim < 0 || t[i].ndim > TL_MAX_DIMS || !t[i].storage_key || !t[i].name)
            return mala_errf(err, "torch_legacy_serialize: bad tensor record %d", i);
        for (int j = 0; j < i; j++)
            if (strcmp(t[i].storage_key, t[j].storage_key) == 0)
                return mala_errf(err, "torch_legacy_serialize: storage key %s used twice", t[i].storage_key);
    }
    Pw w = {0};
    // magic number, protocol version, sys_info
    pw_begin(&w);
    pw_op(&w, 0x8a); pw_le(&w, sizeof kMagic, 1); pw_bytes(&w, kMagic, sizeof kMagic);
    pw_op(&w, '.');
    pw_begin(&w);
    pw_int(&w, TL_PROTOCOL_VERSION);
    pw_op(&w, '.');
    pw_begin(&w);
    pw_op(&w, '}'); pw_put(&w); pw_op(&w, '(');
    pw_str(&w, "protocol_version"); pw_int(&w, TL_PROTOCOL_VERSION);
    pw_str(&w, "little_endian"); pw_op(&w, 0x88);
    pw_str(&w, "type_sizes"); pw_op(&w, '}'); pw_put(&w); pw_op(&w, '(');
    pw_str(&w, "short"); pw_int(&w, 2);
    pw_str(&w, "int"); pw_int(&w, 4);
    pw_str(&w, "long"); pw_int(&w, 4);
    pw_op(&w, 'u'); pw_op(&w, 'u'); pw_op(&w, '.');

    // the OrderedDict: OrderedDict() then its items in batches
    pw_begin(&w);
    pw_global(&w, "collections", "OrderedDict");
    uint32_t g_odict = pw_put(&w);
    pw_op(&w, ')'); pw_op(&w, 'R'); pw_put(&w);
    int64_t g_rebuild = -1, g_storage_str = -1, g_float = -1, g_cpu = -1;
    for (int start = 0; start < n; start += BATCH) {
        int end = start + BATCH < n ? start + BATCH : n;
        int single = end - start == 1;
        if (!single) pw_op(&w, '(');
        for (int i = start; i < end; i++) {
            const TorchSaveTensor *x = &t[i];
            int64_t stride[TL_MAX_DIMS], acc = 1;
            for (int d = x->ndim - 1; d >= 0; d--) { stride[d] = x->stride ? x->stride[d] : acc; acc *= x->shape[d]; }
            pw_str(&w, x->name);
            if (g_rebuild < 0) { pw_global(&w, "torch._utils", "_rebuild_tensor_v2"); g_rebuild = pw_put(&w); }
            else pw_get(&w, (uint32_t)g_rebuild);
            pw_op(&w, '(');
            // persistent id ('storage', torch.FloatStorage, key, 'cpu', numel, None)
            pw_op(&w, '(');
            if (g_storage_str < 0) g_storage_str = pw_str(&w, "storage"); else pw_get(&w, (uint32_t)g_storage_str);
            if (g_float < 0) { pw_global(&w, "torch", "FloatStorage"); g_float = pw_put(&w); }
            else pw_get(&w, (uint32_t)g_float);
            pw_str(&w, x->storage_key);
            if (g_cpu < 0) g_cpu = pw_str(&w, "cpu"); else pw_get(&w, (uint32_t)g_cpu);
            pw_int(&w, x->storage_numel);
            pw_op(&w, 'N');
            pw_op(&w, 't'); pw_put(&w);
            pw_op(&w, 'Q');
            pw_int(&w, 0);  // storage offset
            pw_int_tuple(&w, x->shape, x->ndim);
            pw_int_tuple(&w, stride, x->ndim);
            pw_op(&w, 0x89);  // requires_grad False
            pw_get(&w, g_odict); pw_op(&w, ')'); pw_op(&w, 'R'); pw_put(&w);  // backward hooks OrderedDict()
            pw_op(&w, 't'); pw_put(&w);
            pw_op(&w, 'R'); pw_put(&w);
        }
        pw_op(&w, single ? 's' : 'u');
    }
    pw_op(&w, '.');

    // storage keys, sorted as strings, then the storages in that order
    const TorchSaveTensor **order = xmalloc((size_t)(n ? n : 1) * sizeof *order);
    for (int i = 0; i < n; i++) order[i] = &t[i];
    qsort(order, (size_t)n, sizeof *order, cmp_key);
    pw_begin(&w);
    pw_op(&w, ']'); pw_put(&w);
    if (n == 1) { pw_str(&w, order[0]->storage_key); pw_op(&w, 'a'); }
    else
        for (int start = 0; start < n; start += BATCH) {
            pw_op(&w, '(');
            for (int i = start; i < n && i < start + BATCH; i++) pw_str(&w, order[i]->storage_key);
            pw_op(&w, 'e');
        }
    pw_op(&w, '.');
    for (int i = 0; i < n; i++) {
        pw_le(&w, (uint64_t)order[i]->storage_numel, 8);
        pw_bytes(&w, order[i]->storage, (size_t)order[i]->storage_numel * 4);
    }
    free(order);
    *buf = w.b;
    *len = w.len;
    return 0;
}

int torch_legacy_save(const char *path, const TorchSaveTensor *t, int n, MalaErr *err) {
    unsigned char *buf;
    size_t len;
    if (torch_legacy_serialize(t, n, &buf, &len, err)) return -1;
    int rc = atomic_write_file(path, buf, len, err);
    free(buf);
    return rc;
}
