"""The model's graph: the junction tree built once on the host, and the compiled marginal oracle over it.

* :mod:`~pgmjax.graph.junction`: a junction tree of a set of cliques (triangulation, maximal cliques,
  separators, message order).
* :mod:`~pgmjax.graph.oracle_plan`: the oracle's static plan (compute layouts, clique classes), built
  in NumPy and hashed by value.
* :mod:`~pgmjax.graph.oracle`: log-space belief propagation over the plan: clique marginals and ``log Z``
  from potentials, jitted and differentiable.
* :mod:`~pgmjax.graph.max_sum`: exact max-sum variable elimination over factor tables (NumPy).

Accelerator kernels with pure-JAX references live in :mod:`pgmjax.kernels`.
"""
