"""auto_dream: distil changed daily notes into long-term digest nodes (ARCHITECTURE §11.2, §11.3.2, §6).

Steps, each a small module with typed input/output: :mod:`.extract` (changed inputs → units), :mod:`.integrate`
(one LLM task per unit: recall digest nodes, CREATE / CORROBORATE / REFINE / CORRECT, validated write),
:mod:`.finish` (checkpoint successful inputs, re-index, close the journal run). :mod:`.pipeline` chains them;
:mod:`.node` renders and merges node text; :mod:`.safety` checks every path a model names; prompts live in
``prompts/<step>.<en|zh>.md``.
"""

from .extract import Budget
from .models import DreamReport
from .pipeline import run_auto_dream

__all__ = ["Budget", "DreamReport", "run_auto_dream"]
