/* slots.c - the CPU slots of every node of the pool and the jobs holding them
 *
 * Each rank of a run holds one CPU slot of its node (a GPU rank too: the
 * core that feeds its GPU). Slots are numbered per node from 0 and passed
 * to dlh-train as --cpus, which pins rank r to its slot on its node. A
 * node's probe may find more cores than the pool file said: its slots grow
 * with it (never shrink while a job may hold them). */
#include "engine/live/slots.h"
#include "engine/table/table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DLH_NODE_SLOTS_MAX 65536   /* most slots a run found after a restart may name */

/* Grows *tab (of *len entries) to n zeroed ones. Returns 0, or -ENOMEM. */
static int grow(long **tab, int *len, int n)
{
	if (n <= *len)
		return 0;
	long *h = realloc(*tab, (size_t)n * sizeof *h);
	if (!h)
		return -ENOMEM;
	memset(h + *len, 0, (size_t)(n - *len) * sizeof *h);
	*tab = h;
	*len = n;
	return 0;
}

int eng_slots_fit(struct dlh_engine *e)
{
	for (int k = 0; k < e->pool.nnodes; k++) {
		int g = dlh_pool_node_gpus(&e->pool, k);
		if (g > 0 && grow(&e->gholder[k], &e->gholder_len[k], g))
			return -ENOMEM;
		int n = e->pool.nodes[k].cpus > 0 ? e->pool.nodes[k].cpus : 1;
		if (grow(&e->holder[k], &e->holder_len[k], n))
			return -ENOMEM;
	}
	return 0;
}

void eng_slots_close(struct dlh_engine *e)
{
	for (int k = 0; k < DLH_POOL_NODES; k++) {
		free(e->holder[k]);
		e->holder[k] = NULL;
		e->holder_len[k] = 0;
		free(e->gholder[k]);
		e->gholder[k] = NULL;
		e->gholder_len[k] = 0;
	}
}

int eng_slots_held_back(const struct dlh_engine *e, int k)
{
	const struct dlh_pool_node *nd = &e->pool.nodes[k];
	return dlh_pool_is_slurm(&e->pool) && nd->slurm_state[0] && nd->probe == DLH_PROBE_DOWN &&
	       !nd->drained && !nd->removed && !nd->leaving;
}

/* 1 when new ranks may be planned on node k: it is usable, or Slurm holds
 * it back (a run planned over it waits in Slurm's queue). */
static int plannable(const struct dlh_engine *e, int k)
{
	return dlh_pool_node_usable(&e->pool, k) || eng_slots_held_back(e, k);
}

/* Slots of node k new ranks may count on: its cores, none while it is not
 * plannable (drained, down, being probed). */
static int node_slots(const struct dlh_engine *e, int k)
{
	int n = plannable(e, k) ? e->pool.nodes[k].cpus : 0;
	return n < e->holder_len[k] ? n : e->holder_len[k];
}

int eng_slots_usable(const struct dlh_engine *e)
{
	int n = 0;
	for (int k = 0; k < e->pool.nnodes; k++)
		n += node_slots(e, k);
	return n;
}

int eng_slots_capacity(const struct dlh_engine *e, int gpu)
{
	int n = 0;
	for (int k = 0; k < e->pool.nnodes; k++) {
		int c = e->pool.nodes[k].cpus, g = dlh_pool_node_gpus(&e->pool, k);
		if (!e->pool.nodes[k].removed)
			n += gpu && g < c ? g : c;
	}
	return n;
}

int eng_slots_free(const struct dlh_engine *e)
{
	int n = 0;
	for (int k = 0; k < e->pool.nnodes; k++) {
		int f = node_slots(e, k) - e->node_used[k];
		n += f > 0 ? f : 0;
	}
	return n;
}

/* GPUs of node k not held by a job. */
static int gpus_free(const struct dlh_engine *e, int k)
{
	int n = 0;
	for (int i = 0; i < e->gholder_len[k]; i++)
		n += !e->gholder[k][i];
	return n;
}

void eng_slots_avail(const struct dlh_engine *e, int gpu, int all, int *avail)
{
	for (int k = 0; k < e->pool.nnodes; k++) {
		int f = node_slots(e, k) - (all ? 0 : e->node_used[k]);
		int g = all ? dlh_pool_node_gpus(&e->pool, k) : gpus_free(e, k);
		if (gpu && f > g)
			f = plannable(e, k) ? g : 0;
		avail[k] = f > 0 ? f : 0;
	}
}

int eng_slots_take(struct dlh_engine *e, long id, struct dlh_plan *p)
{
	for (int r = 0; r < p->ranks; r++) {
		int k = p->node[r], s = 0;
		while (k >= 0 && s < e->holder_len[k] && e->holder[k][s])
			s++;
		if (k < 0 || s == e->holder_len[k]) {
			eng_slots_give(e, id);
			return -EAGAIN;
		}
		e->holder[k][s] = id;
		e->node_used[k]++;
		e->slots_used++;
		p->slot[r] = s;
		if (!p->gpu)
			continue;
		/* its GPU: the lowest free one of its type on its node */
		int g = 0;
		while (g < e->gholder_len[k] && (e->gholder[k][g] ||
		       (p->gtype[r] >= 0 && dlh_pool_gpu_type(&e->pool, k, g) != p->gtype[r])))
			g++;
		if (g == e->gholder_len[k]) {
			eng_slots_give(e, id);
			return -EAGAIN;
		}
		e->gholder[k][g] = id;
		p->dev[r] = g;
	}
	return 0;
}

int eng_slots_hold(struct dlh_engine *e, long id, int k, int s)
{
	/* a run placed when a probe had found more cores than the pool file says */
	if (k >= 0 && k < e->pool.nnodes && s < DLH_NODE_SLOTS_MAX &&
	    grow(&e->holder[k], &e->holder_len[k], s + 1))
		return -ENOMEM;
	if (k < 0 || k >= e->pool.nnodes || s < 0 || s >= e->holder_len[k] || e->holder[k][s])
		return -EBUSY;
	e->holder[k][s] = id;
	e->node_used[k]++;
	e->slots_used++;
	return 0;
}

int eng_slots_hold_plan(struct dlh_engine *e, long id, const struct dlh_plan *p)
{
	int rc = 0;
	for (int r = 0; r < p->ranks && !rc; r++) {
		int k = p->node[r], s = p->slot[r];
		if (k < 0 || k >= e->pool.nnodes) {
			rc = -EBUSY;
			break;
		}
		if (s < 0) {   /* the lowest free one, as at launch */
			for (s = 0; s < e->holder_len[k] && e->holder[k][s]; s++)
				;
			if (s == e->holder_len[k]) {
				rc = -EBUSY;
				break;
			}
		}
		rc = eng_slots_hold(e, id, k, s);
		if (rc || !p->gpu)
			continue;
		int g = p->dev[r];
		if (g < 0 || g >= e->gholder_len[k] || e->gholder[k][g])
			rc = -EBUSY;
		else
			e->gholder[k][g] = id;
	}
	if (rc)
		eng_slots_give(e, id);
	return rc;
}

void eng_slots_give(struct dlh_engine *e, long id)
{
	for (int k = 0; k < e->pool.nnodes; k++) {
		for (int s = 0; s < e->holder_len[k]; s++)
			if (e->holder[k][s] == id) {
				e->holder[k][s] = 0;
				e->node_used[k]--;
				e->slots_used--;
			}
		for (int g = 0; g < e->gholder_len[k]; g++)
			if (e->gholder[k][g] == id)
				e->gholder[k][g] = 0;
	}
}
