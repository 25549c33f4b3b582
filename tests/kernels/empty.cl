/* Does nothing: the dispatch round trip of the broker, measured alone. */
__kernel void empty(void)
{
}
