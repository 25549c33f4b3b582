/* A particle filter's motion step (after Rodinia's particlefilter): double
 * sin and cos, whose argument reduction uses V_TRIG_PREOP_F64 for large
 * angles. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void particle_move(__global double *x, __global double *y, __global const double *angle,
                            __global const double *speed, __global double *sc, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        double a = angle[i], s = sin(a), c = cos(a);
        x[i] += speed[i] * c;
        y[i] += speed[i] * s;
        sc[2 * i] = s;
        sc[2 * i + 1] = c;
}
