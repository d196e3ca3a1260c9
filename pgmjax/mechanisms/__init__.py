"""Privacy mechanisms as thin front-ends over the estimation engine.

Each front-end runs two arms on the same noisy measurements: the mechanism's
own estimator (``result.original``) and the engine (``result.model``).
"""
