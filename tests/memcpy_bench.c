// SPDX-License-Identifier: GPL-2.0
/*
 * The floor of a software RDMA WRITE or READ: one copy. memcpy bandwidth
 * between two buffers of each size, each copy of the whole buffer, for about
 * half a second per size after a warm-up, as "floor memcpy <bytes> <MB/s>".
 * The source and destination are distinct, as an RDMA transfer's are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t sizes[] = { 4096, 65536, 1 << 20 };
	double secs = argc > 1 ? atof(argv[1]) : 0.5;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t len = sizes[s];
		char *src = aligned_alloc(4096, len), *dst = aligned_alloc(4096, len);
		unsigned long n = 0;
		double t0, t;

		if (!src || !dst) {
			fprintf(stderr, "no memory for %zu bytes\n", len);
			return 1;
		}
		memset(src, 0x5a, len);
		memset(dst, 0, len);
		memcpy(dst, src, len);
		t0 = now_s();
		do {
			/* Check the clock every few copies: small copies are fast. */
			for (int i = 0; i < 16; i++, n++) {
				src[n % len] = (char)n;
				memcpy(dst, src, len);
			}
			t = now_s();
		} while (t - t0 < secs);
		if (dst[(n - 1) % len] != (char)(n - 1))
			return 1;
		printf("floor memcpy %zu %.1f MB/s\n", len, (double)n * len / (t - t0) / 1e6);
		free(src);
		free(dst);
	}
	return 0;
}
