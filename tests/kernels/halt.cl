/* Halts its wave at once (s_sethalt 1): on a GPU the wave stops issuing
 * instructions, holding its queue and its CU slot at no cost to anyone's CPU
 * until the daemon's DispatchTimeout= aborts it; the simulated GPU runs no
 * s_sethalt and stops the queue there, which holds it the same way (an
 * instruction it cannot run stops the queue without an event, kfd-facts §7.2).
 * A hostile client's way to sit on compute slots (tests/integration/test-hogs.c). */
__kernel void halt(__global uint *out)
{
        __asm__ volatile("s_sethalt 1");
        out[get_global_id(0)] = 1;
}
