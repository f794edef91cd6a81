/* slots.c - the CPU slots of every node of the pool and the jobs holding them
 *
 * Each rank of a run holds one CPU slot of its node (a GPU rank too: the
 * core that feeds its GPU). Slots are numbered per node from 0 and passed
 * to dlh-train as --cpus, which pins rank r to its slot on its node. A
 * node's probe may find more cores than the pool file said: its slots grow
 * with it (never shrink while a job may hold them). */
#include "engine/jobs/table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int eng_slots_fit(struct dlh_engine *e)
{
	for (int k = 0; k < e->pool.nnodes; k++) {
		int n = e->pool.nodes[k].cpus > 0 ? e->pool.nodes[k].cpus : 1;
		if (n <= e->holder_len[k])
			continue;
		long *h = realloc(e->holder[k], (size_t)n * sizeof *h);
		if (!h)
			return -ENOMEM;
		memset(h + e->holder_len[k], 0, (size_t)(n - e->holder_len[k]) * sizeof *h);
		e->holder[k] = h;
		e->holder_len[k] = n;
	}
	return 0;
}

void eng_slots_close(struct dlh_engine *e)
{
	for (int k = 0; k < DLH_POOL_NODES; k++) {
		free(e->holder[k]);
		e->holder[k] = NULL;
		e->holder_len[k] = 0;
	}
}

/* Slots of node k new ranks may count on: its cores, none while it is not
 * usable (drained, down, being probed). */
static int node_slots(const struct dlh_engine *e, int k)
{
	int n = dlh_pool_node_usable(&e->pool, k) ? e->pool.nodes[k].cpus : 0;
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

void eng_slots_avail(const struct dlh_engine *e, int gpu, int all, int *avail)
{
	for (int k = 0; k < e->pool.nnodes; k++) {
		int f = node_slots(e, k) - (all ? 0 : e->node_used[k]);
		int g = dlh_pool_node_gpus(&e->pool, k);
		if (gpu && f > g)
			f = dlh_pool_node_usable(&e->pool, k) ? g : 0;
		avail[k] = f > 0 ? f : 0;
	}
}

int eng_slots_take(struct dlh_engine *e, long id, struct dlh_plan *p)
{
	for (int r = 0; r < p->ranks; r++) {
		int k = p->node[r], s = 0;
		while (s < e->holder_len[k] && e->holder[k][s])
			s++;
		if (k < 0 || s == e->holder_len[k]) {
			eng_slots_give(e, id);
			return -EAGAIN;
		}
		e->holder[k][s] = id;
		e->node_used[k]++;
		e->slots_used++;
		p->slot[r] = s;
	}
	return 0;
}

int eng_slots_hold(struct dlh_engine *e, long id, int k, int s)
{
	if (k < 0 || k >= e->pool.nnodes || s < 0 || s >= e->holder_len[k] || e->holder[k][s])
		return -EBUSY;
	e->holder[k][s] = id;
	e->node_used[k]++;
	e->slots_used++;
	return 0;
}

void eng_slots_give(struct dlh_engine *e, long id)
{
	for (int k = 0; k < e->pool.nnodes; k++)
		for (int s = 0; s < e->holder_len[k]; s++)
			if (e->holder[k][s] == id) {
				e->holder[k][s] = 0;
				e->node_used[k]--;
				e->slots_used--;
			}
}
