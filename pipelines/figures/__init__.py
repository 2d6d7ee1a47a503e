"""Figures read from the tables people ask about: a statement's row, its column, its period and its unit.

A filing's statement page is stored as a text chunk that holds its title, its unit line ("(In millions, except per
share data)") and its column headers ("December 2, 2022 December 3, 2021"), followed by table chunks whose lines are
rows ("Total assets | $ 27,165 $ | 27,241"). A reader asking "What were Adobe's total assets at the end of fiscal
2022?" needs the figure under the 2022 column, in the table's unit, with the row, the header and the unit line quoted.

* :mod:`pipelines.figures.numbers`: a printed figure ("$ 27,165", "(1,084)", "12.5%") as a number, and back;
* :mod:`pipelines.figures.periods`: the period a question names ("FY2022", "fiscal 2022", "in 2017", "year end");
* :mod:`pipelines.figures.tables`: a page's chunks read as one table: its unit, its period columns, its rows,
  each with the chunk and span it is quoted from.

The answer kinds that use them are :mod:`pipelines.questions.figures` (a line item's figure) and
:mod:`pipelines.questions.computed` (a metric computed from quoted rows).
"""
