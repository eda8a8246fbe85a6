"""Plan search and time to train (issue 34): the best parallelism plan for a model on a chip
budget, ranked by an analytic estimate and confirmed by the engine; how long a token budget
takes on it, or the fewest chips that meet a deadline, at what cost and energy.

Typical use::

    from podsim.plan import PlanQuery, search, TrainQuery, time_to_train
    s = search(PlanQuery("llama2-70b", "tpu-v5p", chips=1024))
    s.best.step_s, s.best.assessed.candidate.label()
    t = time_to_train(TrainQuery(PlanQuery("llama2-70b", "tpu-v5p"), tokens=2e12, days=30))
    t.chips, t.days.value

Modules: space (what is enumerated), candidate (a plan: refusal, HBM, estimate), program (the
step as passes), pricing (closed-form collectives on the job's slices), overlap (collectives in
flight sharing axes), estimate (the analytic step), search, explain (why a plan loses), goodput
(failures and restarts), train (time to train), result (rows and dicts for every face).
"""

from typing import TYPE_CHECKING

from podsim._lazy import lazy_face

if TYPE_CHECKING:  # the face's names, each imported on first use (podsim._lazy: start-up)
    from podsim.plan.result import search_summary, train_summary
    from podsim.plan.search import PlanQuery, search
    from podsim.plan.train import TrainQuery, time_to_train

__all__ = ["PlanQuery", "TrainQuery", "search", "search_summary", "time_to_train", "train_summary"]

lazy_face(__name__)
