/* Every work-item bumps one counter `rounds` times and a second by its
 * work-item ID once: long runs of atomics on one address from every
 * workgroup, the contention test of the interpreter's parallel atomics
 * (tests/unit/isa/test-isa-parallel.c). */
__kernel void atomic_storm(__global uint *counter, uint rounds)
{
        for (uint i = 0; i < rounds; i++)
                atomic_inc(&counter[0]);
        atomic_add(&counter[1], (uint) get_global_id(0));
}
