/* SPDX-License-Identifier: MIT */
/*
 * Decoding of the NT_AMDGPU_METADATA note of a code object (see
 * gpu-code-object-internal.h) with msgpack-c. The schema is LLVM AMDGPUUsage
 * "Code Object V3 Metadata" as amended for V4 and V5 (the versions the loader
 * accepts): a map with amdhsa.version [major, minor], amdhsa.target and
 * amdhsa.kernels, an array of one map per kernel.
 *
 * Of each kernel we keep .symbol, .kernarg_segment_size,
 * .kernarg_segment_align, .group_segment_fixed_size,
 * .private_segment_fixed_size, .max_flat_workgroup_size, .wavefront_size
 * (all required) and .args (optional: a kernel may have none); .name must be
 * there and be a string (of any length: the loader names a kernel after its
 * descriptor symbol). Of each argument: .offset, .size, .value_kind
 * (required), .name and .address_space (optional). Other keys are ignored;
 * a key that appears twice in a map is refused.
 *
 * Value kinds: by_value → GPU_ARG_BY_VALUE; global_buffer (64-bit address
 * of global, constant or generic memory) → GPU_ARG_GLOBAL_BUFFER;
 * dynamic_shared_pointer (a 32-bit `local` pointer) → GPU_ARG_DYNAMIC_LDS;
 * every hidden_* → GPU_ARG_HIDDEN (value_kind kept for the dispatcher, which
 * fills those it knows and zeroes the rest). image, sampler, pipe and queue
 * need runtime objects kfdbroker does not provide: a kernel that takes one is
 * refused when the object is loaded, naming the argument, rather than loaded
 * and refused at dispatch. Any other value kind is refused too.
 *
 * Arguments must come in increasing offset order, not overlap and end inside
 * .kernarg_segment_size; sizes are > 0 (8 for global_buffer, 4 for
 * dynamic_shared_pointer); names are printable ASCII of at most 63 bytes.
 *
 * Resource bound: msgpack-c allocates a container's element array when it
 * reads the container's header (unpack.c template_callback_array/map:
 * n * sizeof(msgpack_object) bytes, before any element is read), so a 5-byte
 * "array of 2^32 elements" would make it ask for ~100 GiB. Before handing the
 * bytes to msgpack-c, msgpack_measure() walks the item headers (no values are
 * decoded) and refuses a document whose containers claim more elements than
 * there are bytes left or more than MSGPACK_MAX_ELEMENTS in all.
 */
#include <errno.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu-code-object-internal.h"
#include "util/macro.h"

/* Real metadata has ~30 elements per kernel plus ~16 per argument: 1024
 * kernels of 64 arguments stay below this; msgpack-c then allocates at most
 * ~50 MiB for the decoded tree. */
#define MSGPACK_MAX_ELEMENTS (2u << 20)

static uint64_t be_read(const uint8_t *p, unsigned n) {
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v = (v << 8) | p[i];
        return v;
}

/*
 * Walks the headers of one msgpack document (formats per the MessagePack
 * specification, msgpack/msgpack spec.md "Formats"): returns its length in
 * bytes, or -EBADMSG if it is truncated, uses the unassigned byte 0xc1, or has
 * containers claiming more elements than bytes remain (every element takes
 * at least one byte) or more than MSGPACK_MAX_ELEMENTS in all.
 */
static int64_t msgpack_measure(const uint8_t *p, size_t n) {
        size_t pos = 0;
        uint64_t pending = 1, total = 0;

        while (pending > 0) {
                uint64_t skip = 0, items = 0;
                unsigned len_bytes = 0;

                if (pos >= n)
                        return -EBADMSG;
                uint8_t t = p[pos++];
                pending--;

                if (t <= 0x7f || t >= 0xe0) /* positive / negative fixint */
                        ;
                else if (t <= 0x8f) /* fixmap */
                        items = 2u * (t & 0x0fu);
                else if (t <= 0x9f) /* fixarray */
                        items = t & 0x0fu;
                else if (t <= 0xbf) /* fixstr */
                        skip = t & 0x1fu;
                else
                        switch (t) {
                        case 0xc0:
                        case 0xc2:
                        case 0xc3: /* nil, false, true */
                                break;
                        case 0xc4:
                        case 0xd9: /* bin 8, str 8 */
                                len_bytes = 1;
                                break;
                        case 0xc5:
                        case 0xda: /* bin 16, str 16 */
                                len_bytes = 2;
                                break;
                        case 0xc6:
                        case 0xdb: /* bin 32, str 32 */
                                len_bytes = 4;
                                break;
                        case 0xc7:
                        case 0xc8:
                        case 0xc9: /* ext 8/16/32: length, then type byte */
                                len_bytes = t == 0xc7 ? 1 : t == 0xc8 ? 2 : 4;
                                skip = 1;
                                break;
                        case 0xcc: /* uint 8 */
                        case 0xd0: /* int 8 */
                                skip = 1;
                                break;
                        case 0xcd: /* uint 16 */
                        case 0xd1: /* int 16 */
                        case 0xd4: /* fixext 1: type, 1 byte */
                                skip = 2;
                                break;
                        case 0xd5: /* fixext 2 */
                                skip = 3;
                                break;
                        case 0xca: /* float 32 */
                        case 0xce: /* uint 32 */
                        case 0xd2: /* int 32 */
                                skip = 4;
                                break;
                        case 0xd6: /* fixext 4 */
                                skip = 5;
                                break;
                        case 0xcb: /* float 64 */
                        case 0xcf: /* uint 64 */
                        case 0xd3: /* int 64 */
                                skip = 8;
                                break;
                        case 0xd7: /* fixext 8 */
                                skip = 9;
                                break;
                        case 0xd8: /* fixext 16 */
                                skip = 17;
                                break;
                        case 0xdc:
                        case 0xdd: /* array 16/32 */
                        case 0xde:
                        case 0xdf: { /* map 16/32 */
                                unsigned nb = (t == 0xdc || t == 0xde) ? 2 : 4;
                                if (n - pos < nb)
                                        return -EBADMSG;
                                items = be_read(p + pos, nb) * (t >= 0xde ? 2u : 1u);
                                pos += nb;
                                break;
                        }
                        default: /* 0xc1: never used */
                                return -EBADMSG;
                        }

                if (len_bytes > 0) {
                        if (n - pos < len_bytes)
                                return -EBADMSG;
                        skip += be_read(p + pos, len_bytes);
                        pos += len_bytes;
                }
                if (skip > n - pos)
                        return -EBADMSG;
                pos += skip;

                total += items;
                pending += items;
                if (pending > n - pos || total > MSGPACK_MAX_ELEMENTS)
                        return -EBADMSG;
        }
        return (int64_t) pos;
}

/* ---- typed access to the decoded tree ---- */

typedef struct Md {
        char *err;
        size_t errlen;
        char where[200]; /* "kernel 'foo'" / "kernel 'foo' argument 2", for messages */
} Md;

static const char *type_name(const msgpack_object *o) {
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                return "nil";
        case MSGPACK_OBJECT_BOOLEAN:
                return "a boolean";
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                return "an integer";
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                return "a negative integer";
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                return "a float";
        case MSGPACK_OBJECT_STR:
                return "a string";
        case MSGPACK_OBJECT_ARRAY:
                return "an array";
        case MSGPACK_OBJECT_MAP:
                return "a map";
        case MSGPACK_OBJECT_BIN:
                return "binary data";
        case MSGPACK_OBJECT_EXT:
                return "an extension object";
        }
        return "an unknown object";
}

static bool str_is(const msgpack_object *o, const char *s) {
        size_t n = strlen(s);
        return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

/* The value of key in map: 0 and *ret (NULL if absent), or -EINVAL if the key
 * appears twice. */
static int map_get(Md *md, const msgpack_object *map, const char *key, const msgpack_object **ret) {
        const msgpack_object *found = NULL;

        *ret = NULL; /* also on error: gcc -O3 cannot see that the error is negative */
        for (uint32_t i = 0; i < map->via.map.size; i++) {
                const msgpack_object_kv *kv = &map->via.map.ptr[i];
                if (!str_is(&kv->key, key))
                        continue;
                if (found)
                        return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                                     "metadata: %s has key %s twice", md->where, key);
                found = &kv->val;
        }
        *ret = found;
        return 0;
}

static int get_u32(Md *md, const msgpack_object *map, const char *key, bool required, uint32_t *ret) {
        const msgpack_object *v;
        int r = map_get(md, map, key, &v);
        if (r < 0)
                return r;
        if (!v) {
                if (required)
                        return gpu_code_object_error(md->err, md->errlen, -EINVAL, "metadata: %s has no %s",
                                                     md->where, key);
                return 0;
        }
        if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s %s is %s, expected an unsigned integer",
                                             md->where, key, type_name(v));
        if (v->via.u64 > UINT32_MAX)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s %s = %llu is out of range", md->where, key,
                                             (unsigned long long) v->via.u64);
        *ret = (uint32_t) v->via.u64;
        return 1;
}

/* A string value copied into buf (size bytes with the NUL). Refused if it
 * does not fit or has bytes outside printable ASCII (lo..0x7e). Returns 1 if
 * present, 0 if absent and optional. */
static int get_str(Md *md, const msgpack_object *map, const char *key, bool required, char lo, char *buf,
                   size_t size) {
        const msgpack_object *v;
        char esc[280];
        int r = map_get(md, map, key, &v);
        if (r < 0)
                return r;
        if (!v) {
                if (required)
                        return gpu_code_object_error(md->err, md->errlen, -EINVAL, "metadata: %s has no %s",
                                                     md->where, key);
                return 0;
        }
        if (v->type != MSGPACK_OBJECT_STR)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s %s is %s, expected a string", md->where, key,
                                             type_name(v));
        if (v->via.str.size >= size)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s %s is %u bytes long, the limit is %zu",
                                             md->where, key, v->via.str.size, size - 1);
        for (uint32_t i = 0; i < v->via.str.size; i++) {
                char ch = v->via.str.ptr[i];
                if (ch < lo || ch > 0x7e)
                        return gpu_code_object_error(
                                md->err, md->errlen, -EINVAL,
                                "metadata: %s %s '%s' has a byte outside printable ASCII", md->where, key,
                                gpu_code_object_escape(v->via.str.ptr, v->via.str.size, esc));
        }
        memcpy(buf, v->via.str.ptr, v->via.str.size);
        buf[v->via.str.size] = '\0';
        return 1;
}

static int parse_arg(Md *md, const msgpack_object *o, GpuKernelArg *a) {
        char space[32] = "";
        int r;

        if (o->type != MSGPACK_OBJECT_MAP)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s is %s, expected a map", md->where, type_name(o));
        r = get_str(md, o, ".name", false, 0x20, a->name, sizeof a->name);
        if (r < 0)
                return r;
        if ((r = get_u32(md, o, ".offset", true, &a->offset)) < 0 ||
            (r = get_u32(md, o, ".size", true, &a->size)) < 0 ||
            (r = get_str(md, o, ".value_kind", true, 0x21, a->value_kind, sizeof a->value_kind)) < 0 ||
            (r = get_str(md, o, ".address_space", false, 0x21, space, sizeof space)) < 0)
                return r;

        const char *k = a->value_kind;
        uint32_t want_size = 0;
        if (streq(k, "by_value"))
                a->kind = GPU_ARG_BY_VALUE;
        else if (streq(k, "global_buffer")) {
                a->kind = GPU_ARG_GLOBAL_BUFFER;
                want_size = 8;
                if (space[0] && !streq(space, "global") && !streq(space, "constant") &&
                    !streq(space, "generic"))
                        return gpu_code_object_error(
                                md->err, md->errlen, -EINVAL,
                                "metadata: %s is a global_buffer in address space '%s'", md->where, space);
        } else if (streq(k, "dynamic_shared_pointer")) {
                a->kind = GPU_ARG_DYNAMIC_LDS;
                want_size = 4;
                if (space[0] && !streq(space, "local"))
                        return gpu_code_object_error(
                                md->err, md->errlen, -EINVAL,
                                "metadata: %s is a dynamic_shared_pointer in address space '%s'", md->where,
                                space);
        } else if (strncmp(k, "hidden_", 7) == 0)
                a->kind = GPU_ARG_HIDDEN;
        else if (streq(k, "image") || streq(k, "sampler") || streq(k, "pipe") || streq(k, "queue"))
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s is a%s %s: images, samplers, pipes and device "
                                             "queues are not supported",
                                             md->where, k[0] == 'i' ? "n" : "", k);
        else
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s has unknown value_kind '%s'", md->where, k);

        if (a->size == 0)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL, "metadata: %s has size 0",
                                             md->where);
        if (want_size && a->size != want_size)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s is a %s of %u bytes, expected %u", md->where, k,
                                             a->size, want_size);
        return 0;
}

static int parse_kernel(Md *md, const msgpack_object *o, unsigned index, GpuKernelMetadata *km) {
        GpuKernel *k = &km->kernel;
        const msgpack_object *args, *name;
        int r;

        snprintf(md->where, sizeof md->where, "kernel %u", index);
        if (o->type != MSGPACK_OBJECT_MAP)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s is %s, expected a map", md->where, type_name(o));
        if ((r = get_str(md, o, ".symbol", true, 0x21, km->symbol, sizeof km->symbol)) < 0)
                return r;
        snprintf(md->where, sizeof md->where, "kernel '%s'", km->symbol);
        /* The kernel's name is taken from its descriptor symbol; .name (the
         * source-level name, which may be longer) only has to be there. */
        if ((r = map_get(md, o, ".name", &name)) < 0)
                return r;
        if (!name || name->type != MSGPACK_OBJECT_STR)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s .name is %s, expected a string", md->where,
                                             name ? type_name(name) : "missing");
        if ((r = get_u32(md, o, ".kernarg_segment_size", true, &k->kernarg_size)) < 0 ||
            (r = get_u32(md, o, ".kernarg_segment_align", true, &k->kernarg_align)) < 0 ||
            (r = get_u32(md, o, ".group_segment_fixed_size", true, &k->group_segment_size)) < 0 ||
            (r = get_u32(md, o, ".private_segment_fixed_size", true, &k->private_segment_size)) < 0 ||
            (r = get_u32(md, o, ".max_flat_workgroup_size", true, &k->max_flat_workgroup_size)) < 0 ||
            (r = get_u32(md, o, ".wavefront_size", true, &km->wavefront_size)) < 0)
                return r;

        if (k->kernarg_size > GPU_KERNEL_MAX_KERNARG_SIZE)
                return gpu_code_object_error(
                        md->err, md->errlen, -EINVAL,
                        "metadata: %s .kernarg_segment_size %u is over the limit of %u", md->where,
                        k->kernarg_size, GPU_KERNEL_MAX_KERNARG_SIZE);
        /* AMDGPUUsage: "Must be a power of 2"; the kernarg segment is at least
         * 4-byte aligned in practice, beyond a page makes no sense. */
        if (!is_power_of_2_u64(k->kernarg_align) || k->kernarg_align > 4096)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s .kernarg_segment_align %u is not a power of "
                                             "two up to 4096",
                                             md->where, k->kernarg_align);
        if (k->max_flat_workgroup_size == 0 || k->max_flat_workgroup_size > 1024)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s .max_flat_workgroup_size %u is not in 1..1024",
                                             md->where, k->max_flat_workgroup_size);
        if (km->wavefront_size != 32 && km->wavefront_size != 64)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s .wavefront_size %u is neither 32 nor 64",
                                             md->where, km->wavefront_size);

        if ((r = map_get(md, o, ".args", &args)) < 0)
                return r;
        if (!args)
                return 0;
        if (args->type != MSGPACK_OBJECT_ARRAY)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: %s .args is %s, expected an array", md->where,
                                             type_name(args));
        if (args->via.array.size > GPU_KERNEL_MAX_ARGS)
                return gpu_code_object_error(md->err, md->errlen, -E2BIG,
                                             "metadata: %s has %u arguments, the limit is %u", md->where,
                                             args->via.array.size, GPU_KERNEL_MAX_ARGS);

        char kernel_where[sizeof md->where];
        memcpy(kernel_where, md->where, sizeof kernel_where);
        uint64_t end = 0;
        for (uint32_t i = 0; i < args->via.array.size; i++) {
                GpuKernelArg *a = &k->args[i];
                snprintf(md->where, sizeof md->where, "%.150s argument %u", kernel_where, i);
                r = parse_arg(md, &args->via.array.ptr[i], a);
                if (r < 0)
                        return r;
                if (a->name[0])
                        snprintf(md->where, sizeof md->where, "%.120s argument %u '%s'", kernel_where, i,
                                 a->name);
                if (a->offset < end)
                        return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                                     "metadata: %s at offset %u overlaps the argument "
                                                     "before it or is out of offset order",
                                                     md->where, a->offset);
                end = (uint64_t) a->offset + a->size;
                if (end > k->kernarg_size)
                        return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                                     "metadata: %s (offset %u, size %u) ends past the "
                                                     "kernarg segment of %u bytes",
                                                     md->where, a->offset, a->size, k->kernarg_size);
        }
        k->n_args = args->via.array.size;
        memcpy(md->where, kernel_where, sizeof kernel_where);
        return 0;
}

static int parse_root(Md *md, const msgpack_object *root, GpuCodeObjectMetadata *m) {
        const msgpack_object *v, *kernels;
        int r;

        snprintf(md->where, sizeof md->where, "the document");
        if (root->type != MSGPACK_OBJECT_MAP)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: the document is %s, expected a map",
                                             type_name(root));

        if ((r = map_get(md, root, "amdhsa.version", &v)) < 0)
                return r;
        if (!v)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL, "metadata: no amdhsa.version");
        if (v->type != MSGPACK_OBJECT_ARRAY || v->via.array.size != 2 ||
            v->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            v->via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
            v->via.array.ptr[0].via.u64 > UINT32_MAX || v->via.array.ptr[1].via.u64 > UINT32_MAX)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: amdhsa.version is not [major, minor]");
        m->version[0] = (uint32_t) v->via.array.ptr[0].via.u64;
        m->version[1] = (uint32_t) v->via.array.ptr[1].via.u64;
        /* Major 1 is the V3+ schema (AMDGPUUsage: V4 is 1.1, V5 is 1.2). */
        if (m->version[0] != 1)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: amdhsa.version %u.%u is not 1.x", m->version[0],
                                             m->version[1]);

        if ((r = get_str(md, root, "amdhsa.target", false, 0x21, m->target, sizeof m->target)) < 0)
                return r;

        if ((r = map_get(md, root, "amdhsa.kernels", &kernels)) < 0)
                return r;
        if (!kernels)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL, "metadata: no amdhsa.kernels");
        if (kernels->type != MSGPACK_OBJECT_ARRAY)
                return gpu_code_object_error(md->err, md->errlen, -EINVAL,
                                             "metadata: amdhsa.kernels is %s, expected an array",
                                             type_name(kernels));
        if (kernels->via.array.size > GPU_CODE_OBJECT_MAX_KERNELS)
                return gpu_code_object_error(md->err, md->errlen, -E2BIG,
                                             "metadata: %u kernels, the limit is %u",
                                             kernels->via.array.size, GPU_CODE_OBJECT_MAX_KERNELS);
        if (kernels->via.array.size > 0) {
                m->kernels = calloc(kernels->via.array.size, sizeof *m->kernels);
                if (!m->kernels)
                        return gpu_code_object_error(md->err, md->errlen, -ENOMEM, "out of memory");
        }
        for (uint32_t i = 0; i < kernels->via.array.size; i++) {
                r = parse_kernel(md, &kernels->via.array.ptr[i], i, &m->kernels[i]);
                if (r < 0)
                        return r;
                m->n_kernels = i + 1;
        }
        return 0;
}

int gpu_code_object_metadata_parse(const void *desc, size_t size, GpuCodeObjectMetadata *ret, char *err,
                                   size_t errlen) {
        Md md = { .err = err, .errlen = errlen };
        GpuCodeObjectMetadata m = {};
        msgpack_unpacked doc;
        size_t off = 0;

        int64_t len = msgpack_measure(desc, size);
        if (len < 0)
                return gpu_code_object_error(err, errlen, -EINVAL,
                                             "metadata: the NT_AMDGPU_METADATA note is not a valid msgpack "
                                             "document");
        if ((size_t) len != size)
                return gpu_code_object_error(err, errlen, -EINVAL,
                                             "metadata: %zu bytes after the msgpack document",
                                             size - (size_t) len);

        msgpack_unpacked_init(&doc);
        msgpack_unpack_return ur = msgpack_unpack_next(&doc, desc, size, &off);
        int r;
        /* msgpack-c also says NOMEM for containers nested deeper than its
         * stack (MSGPACK_EMBED_STACK_SIZE, 32 levels); allocations are bounded
         * by msgpack_measure(), so that is what it means here. */
        if (ur == MSGPACK_UNPACK_NOMEM_ERROR)
                r = gpu_code_object_error(err, errlen, -EINVAL,
                                          "metadata: the msgpack document is nested too deeply");
        else if (ur != MSGPACK_UNPACK_SUCCESS || off != size)
                r = gpu_code_object_error(err, errlen, -EINVAL,
                                          "metadata: the NT_AMDGPU_METADATA note is not a valid msgpack "
                                          "document");
        else
                r = parse_root(&md, &doc.data, &m);
        msgpack_unpacked_destroy(&doc);
        if (r < 0) {
                gpu_code_object_metadata_done(&m);
                return r;
        }
        *ret = m;
        return 0;
}

void gpu_code_object_metadata_done(GpuCodeObjectMetadata *m) {
        free(m->kernels);
        m->kernels = NULL;
        m->n_kernels = 0;
}
