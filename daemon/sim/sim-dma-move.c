/* SPDX-License-Identifier: MIT */
/*
 * See sim-dma-move.h. The streaming loops align the destination to 16 bytes
 * with ordinary stores, then write 64 bytes per iteration with MOVNTDQ
 * (_mm_stream_si128) from unaligned loads, then the tail with ordinary
 * stores, and end with SFENCE: streaming stores are weakly ordered, and the
 * engine's next write (a FENCE packet's release store, the rptr) must not
 * become visible before them.
 */
#include "sim-dma-move.h"

#include <stdbool.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

static bool overlap(const void *dst, const void *src, size_t n) {
        uintptr_t d = (uintptr_t) dst, s = (uintptr_t) src;

        return d < s + n && s < d + n;
}

#if HAVE_STREAM
/* Bytes to write with ordinary stores before dst is 16-byte aligned. */
static size_t head_bytes(const void *dst, size_t n) {
        size_t h = (16 - ((uintptr_t) dst & 15)) & 15;

        return h < n ? h : n;
}

static void stream_copy(uint8_t *dst, const uint8_t *src, size_t n) {
        size_t h = head_bytes(dst, n), i;

        memcpy(dst, src, h);
        dst += h, src += h, n -= h;
        for (i = 0; i + 64 <= n; i += 64) {
                __m128i a = _mm_loadu_si128((const __m128i *) (const void *) (src + i));
                __m128i b = _mm_loadu_si128((const __m128i *) (const void *) (src + i + 16));
                __m128i c = _mm_loadu_si128((const __m128i *) (const void *) (src + i + 32));
                __m128i d = _mm_loadu_si128((const __m128i *) (const void *) (src + i + 48));
                _mm_stream_si128((__m128i *) (void *) (dst + i), a);
                _mm_stream_si128((__m128i *) (void *) (dst + i + 16), b);
                _mm_stream_si128((__m128i *) (void *) (dst + i + 32), c);
                _mm_stream_si128((__m128i *) (void *) (dst + i + 48), d);
        }
        memcpy(dst + i, src + i, n - i);
        _mm_sfence();
}

static void stream_fill32(uint8_t *dst, uint32_t pattern, size_t n) {
        size_t h = head_bytes(dst, n), i;
        uint32_t rot;
        __m128i v;

        /* dst is dword aligned relative to the fill's start; the pattern as
         * it continues at the first 16-byte boundary. */
        for (i = 0; i < h; i++)
                dst[i] = (uint8_t) (pattern >> (8 * (i & 3)));
        rot = (h & 3) ? (pattern >> (8 * (h & 3))) | (pattern << (32 - 8 * (h & 3))) : pattern;
        v = _mm_set1_epi32((int) rot);
        dst += h, n -= h;
        for (i = 0; i + 64 <= n; i += 64) {
                _mm_stream_si128((__m128i *) (void *) (dst + i), v);
                _mm_stream_si128((__m128i *) (void *) (dst + i + 16), v);
                _mm_stream_si128((__m128i *) (void *) (dst + i + 32), v);
                _mm_stream_si128((__m128i *) (void *) (dst + i + 48), v);
        }
        for (; i < n; i++)
                dst[i] = (uint8_t) (rot >> (8 * (i & 3)));
        _mm_sfence();
}
#endif

void sim_dma_copy(void *dst, const void *src, size_t n) {
#if HAVE_STREAM
        if (n >= SIM_DMA_STREAM_MIN && !overlap(dst, src, n)) {
                stream_copy(dst, src, n);
                return;
        }
#endif
        memmove(dst, src, n);
}

void sim_dma_fill32(void *dst, uint32_t pattern, size_t n) {
        uint8_t *d = dst;

#if HAVE_STREAM
        if (n >= SIM_DMA_STREAM_MIN) {
                stream_fill32(d, pattern, n);
                return;
        }
#endif
        if (pattern == (pattern & 0xFF) * 0x01010101u) {
                memset(d, (int) (pattern & 0xFF), n);
                return;
        }
        size_t i;
        for (i = 0; i + 4 <= n; i += 4)
                memcpy(d + i, &pattern, 4);
        for (; i < n; i++)
                d[i] = (uint8_t) (pattern >> (8 * (i & 3)));
}
