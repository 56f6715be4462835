/* SPDX-License-Identifier: MIT */
/*
 * call_sites.h - whether a 3.11/3.12 caller's instruction is one that can
 * have pushed its callee's frame itself: a check of a stack copied from
 * outside (frame_walk.c).
 *
 * On 3.11 and 3.12 a frame's instruction pointer (prev_instr) is stored at
 * every instruction, and an instruction that pushes a frame in place (a
 * Python-to-Python call, a __getitem__ or property run by the interpreter
 * itself, a generator resumed by SEND or FOR_ITER) leaves it inside itself
 * (on its last cache unit) while the callee runs. So in a copy of one
 * instant a caller linked straight to its callee is at such an instruction;
 * one at any other (JUMP_BACKWARD, POP_TOP, LOAD_FAST...) was copied at
 * another instant than its callee: the copy is torn. (A callee that came
 * through C, a 3.11 entry frame or one under a 3.12 entry frame, says
 * nothing of its caller's instruction: BINARY_OP calls __add__, a signal
 * handler runs at a JUMP_BACKWARD; the walk does not ask then.)
 *
 * The unit a frame points at may be a cache unit, whose byte is data: the
 * instruction holding it is found by decoding the code's adaptive bytecode
 * from its first instruction, each family's cache units skipped
 * (opcodes/opfamily.h; specialisation rewrites a byte within its family,
 * so the decoding, and the verdict, hold for the code object's life).
 * Decoding gives up (CALL_SITE_UNKNOWN) at a byte it cannot size (the
 * instrumented forms of code being traced or profiled), past
 * CALL_SITES_MAX_BYTES, or at a read that fails: only a unit surely inside
 * an instruction that never pushes a frame is CALL_SITE_PLAIN. Every byte
 * read is the target's: bounded, never trusted further.
 *
 * Verdicts are kept per (code object, unit), CALL_SITES_SLOTS of them, but
 * for CALL_SITE_PLAIN: a code object freed and another made at its address
 * could make one kept wrong, and only a torn copy asks for it (rarely).
 */
#ifndef PYPROF_CALL_SITES_H
#define PYPROF_CALL_SITES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target/opcodes/opfamily.h"
#include "target/py_offsets.h"

#define CALL_SITES_SLOTS 1024			/* a power of two */
#define CALL_SITES_MAX_BYTES (64u << 10)	/* bytecode decoded at most */

enum call_site {
	CALL_SITE_UNKNOWN = 0,	/* cannot tell: never a reason to refuse a copy */
	CALL_SITE_CALLS,	/* in an instruction whose family may push a frame */
	CALL_SITE_PLAIN,	/* in one that never pushes a frame in place */
};

struct call_sites {
	const struct opfamily *table;	/* NULL: not 3.11/3.12, all unknown */
	uint64_t code[CALL_SITES_SLOTS];
	uint32_t unit[CALL_SITES_SLOTS];
	uint8_t site[CALL_SITES_SLOTS];
	unsigned long plain;		/* CALL_SITE_PLAIN verdicts given (-v) */
	unsigned char buf[CALL_SITES_MAX_BYTES];
};

/*
 * 3.11/3.12 (@o->frame_instr_is_prev): whether frame bytes @b (its @owner)
 * are of a frame its caller pushed with its own instruction, not through C:
 * owned by the thread (owner 0; C links a generator's frame to whatever
 * frame is current, gen.throw()), and not a 3.11 entry frame (is_entry set:
 * called from C). 3.12 marks a call from C with an entry frame of its own
 * between the two (owner FRAME_OWNED_BY_CSTACK): never this.
 */
int call_sites__pushed_inline(const struct py_offsets *o, const unsigned char *b, uint8_t owner);

/* A table for CPython @version_hex (cs->table NULL when it has no families). */
void call_sites__init(struct call_sites *cs, uint32_t version_hex);

/*
 * The instruction that holds code unit @unit of bytecode @code (@len bytes
 * from its first instruction), decoded with @t. Pure: what the unit tests
 * and the fuzz harnesses call.
 */
enum call_site call_sites__decode(const struct opfamily *t, const unsigned char *code,
				  size_t len, size_t unit);

/*
 * *site = what instruction @instr (a frame's prev_instr) of code object
 * @code of process @pid is in (CALL_SITE_UNKNOWN when it cannot be told).
 * 0, or -ESRCH.
 */
int call_sites__at(struct call_sites *cs, pid_t pid, const struct py_offsets *o, uint64_t code,
		   uint64_t instr, enum call_site *site);

#endif
