/* slots.h - private to the engine: the CPU slots and GPUs of every node of
 * the live pool and which job holds each (slots.c) */
#ifndef DLH_ENGINE_SLOTS_H
#define DLH_ENGINE_SLOTS_H

#include "engine/plan/plan.h"
#include "engine/table/table.h"

/* Grows each node's slots to its cores (after open or a probe). Returns 0,
 * or -ENOMEM. */
int eng_slots_fit(struct dlh_engine *e);

/* Frees the slot tables. */
void eng_slots_close(struct dlh_engine *e);

/* 1 when node k is out of use only because Slurm says so (drained, down
 * in Slurm; not drained in dlhfs): a Slurm pool's runs may still be
 * planned over it, and wait in Slurm's queue until it is back. */
int eng_slots_held_back(const struct dlh_engine *e, int k);

/* CPU slots of the usable nodes (new runs may count on; Slurm's held back
 * ones too), and of those the ones free now. */
int eng_slots_usable(const struct dlh_engine *e);


/* Ranks every node together could ever take (drained and down ones too;
 * gpu 1: no more than each node's GPUs). */
int eng_slots_capacity(const struct dlh_engine *e, int gpu);
int eng_slots_free(const struct dlh_engine *e);

/* Ranks each node may take now (all 0: as if nothing were held), GPU
 * ranks (gpu 1) no more than its GPUs; 0 for nodes not usable (but those
 * Slurm holds back: eng_slots_held_back). */
void eng_slots_avail(const struct dlh_engine *e, int gpu, int all, int *avail);

/* Holds the lowest free slot of each rank's node (p->node[]) for job id
 * into p->slot[], and for a GPU plan the lowest free GPU of the rank's type
 * there into p->dev[]. Returns 0, or -EAGAIN (nothing held then). */
int eng_slots_take(struct dlh_engine *e, long id, struct dlh_plan *p);

/* Holds slot s of node k for job id. Returns 0, or -EBUSY. */
int eng_slots_hold(struct dlh_engine *e, long id, int k, int s);

/* Holds again for job id what a run found after a restart was given at
 * launch: slot p->slot[r] of each rank's node p->node[r] (-1: the lowest
 * free one there) and for a GPU plan GPU p->dev[r] of it. Returns 0, or
 * -EBUSY when one is held or not in the pool (nothing held then). */
int eng_slots_hold_plan(struct dlh_engine *e, long id, const struct dlh_plan *p);

/* Gives back every slot job id holds. */
void eng_slots_give(struct dlh_engine *e, long id);

#endif
