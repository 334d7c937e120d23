/*
 * idmap_collide.c: print N distinct printable 12-byte ids that all have
 * the same PostgreSQL hash_bytes() value (Jenkins lookup3), one a line.
 * hash_bytes is unkeyed and its mix and final steps are invertible, so
 * such ids are found by choosing the final state and running the steps
 * backwards. They showed the id sets of context_merge going quadratic
 * under hash_bytes; with the keyed SipHash of src/core/idmap.c they do not.
 *
 *   cc -O2 -o /tmp/idmap_collide test/bench/hash_flood/idmap_collide.c
 *   /tmp/idmap_collide 16000 > /tmp/ids.txt
 *
 * Check a line with SELECT hashtext('<id>'): every id gives the same value.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define rot(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

/* inverse of lookup3's final() */
static void
unfinal(uint32_t *a, uint32_t *b, uint32_t *c)
{
	*c += rot(*b, 24); *c ^= *b;
	*b += rot(*a, 14); *b ^= *a;
	*a += rot(*c, 4);  *a ^= *c;
	*c += rot(*b, 16); *c ^= *b;
	*b += rot(*a, 25); *b ^= *a;
	*a += rot(*c, 11); *a ^= *c;
	*c += rot(*b, 14); *c ^= *b;
}

/* inverse of lookup3's mix() */
static void
unmix(uint32_t *a, uint32_t *b, uint32_t *c)
{
	*b -= *a; *c ^= rot(*b, 4);  *c += *b;
	*a -= *c; *b ^= rot(*a, 19); *b += *a;
	*c -= *b; *a ^= rot(*c, 16); *a += *c;
	*b -= *a; *c ^= rot(*b, 8);  *c += *b;
	*a -= *c; *b ^= rot(*a, 6);  *b += *a;
	*c -= *b; *a ^= rot(*c, 4);  *a += *c;
}

static int
usable(uint32_t w)
{
	int			i;

	for (i = 0; i < 4; i++)
	{
		unsigned char ch = (w >> (8 * i)) & 0xff;

		/* printable, and nothing SQL or array literals would need quoted */
		if (ch < 0x21 || ch > 0x7e || ch == '\'' || ch == '$' || ch == '\\' ||
			ch == '"' || ch == ',' || ch == '{' || ch == '}')
			return 0;
	}
	return 1;
}

int
main(int argc, char **argv)
{
	long		n = argc > 1 ? atol(argv[1]) : 16000;
	uint32_t	target = 0x2a2a2a2a;
	uint32_t	init = 0x9e3779b9 + 12 + 3923095;
	uint64_t	x = 88172645463325252ULL;	/* xorshift state */

	while (n > 0)
	{
		uint32_t	a, b, c = target;

		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		a = (uint32_t) x;
		b = (uint32_t) (x >> 32);
		unfinal(&a, &b, &c);
		unmix(&a, &b, &c);
		a -= init; b -= init; c -= init;
		if (!usable(a) || !usable(b) || !usable(c))
			continue;
		/* little-endian words, as hash_bytes reads them */
		printf("%.4s%.4s%.4s\n", (char *) &a, (char *) &b, (char *) &c);
		n--;
	}
	return 0;
}
