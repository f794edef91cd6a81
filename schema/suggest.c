/* suggest.c - did-you-mean for unknown sections and keys (Damerau-Levenshtein distance) */
#include <string.h>
#include <strings.h>

#include "schema/keys.h"

#define NAME_CAP 64   /* longer names are never close to a known one */

/* Optimal-string-alignment distance (edits: insert, delete, substitute,
 * swap two neighbours) between a and b, both at most NAME_CAP bytes. */
static int distance(const char *a, const char *b)
{
	int la = (int)strlen(a), lb = (int)strlen(b);
	int d[NAME_CAP + 1][NAME_CAP + 1];
	for (int i = 0; i <= la; i++)
		d[i][0] = i;
	for (int j = 0; j <= lb; j++)
		d[0][j] = j;
	for (int i = 1; i <= la; i++) {
		for (int j = 1; j <= lb; j++) {
			int cost = a[i - 1] != b[j - 1];
			int best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < best)
				best = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* Scores candidates: 0 case-insensitive match, 1..2 edit distance, 3
 * given is a prefix of the candidate; the lowest score wins, ties to the
 * earliest. Returns the winner, or NULL when no candidate scores. */
const char *dlh_spec_suggest(const char *given, const char *const *cands, int n)
{
	size_t len = strlen(given);
	const char *best = NULL;
	int best_score = 4;
	if (len == 0 || len > NAME_CAP)
		return NULL;
	for (int i = 0; i < n; i++) {
		const char *c = cands[i];
		int score = 4;
		if (strlen(c) > NAME_CAP)
			continue;
		if (!strcasecmp(given, c)) {
			score = 0;
		} else {
			int d = distance(given, c);
			if (d <= 2 && (size_t)d < len)
				score = d;
			else if (len >= 2 && !strncmp(given, c, len))
				score = 3;
		}
		if (score < best_score) {
			best_score = score;
			best = c;
		}
	}
	return best;
}
