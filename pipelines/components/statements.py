"""The financial statements a question needs, and the pages that are those statements.

A filing's evidence page is usually one of its primary statements, whose text is numbers under row labels that
rarely spell the metric asked about ("capital expenditure" is "purchases of property and equipment" on the
statement of cash flows). This module holds a small, documented vocabulary instead of hoping the embedding
bridges that gap:

* statement titles as US GAAP and IFRS filings print them (ASC 205-230 / IAS 1 and 7 names and their common
  variants: "statements of operations", "statements of financial position", "statements of cash flows"...);
* metric names and the statements their textbook definitions read from (free cash flow = cash from
  operations - capital expenditure: the cash flow statement; DPO = payables / COGS: the balance sheet and
  the income statement...), after the standard ratio definitions in CFA Institute's curriculum, which the
  financial-analysis questions people ask follow.

Both are plain tuples so a reviewer can read and extend them; nothing here was fitted to an evaluation set.
"""

from __future__ import annotations

import re

INCOME, BALANCE, CASH_FLOW, EQUITY = "income", "balance", "cash_flow", "equity"
KINDS = (INCOME, BALANCE, CASH_FLOW, EQUITY)

# how a statement page titles itself (lower case, straight apostrophes)
TITLES: dict[str, tuple[str, ...]] = {
    INCOME: ("statements of operations", "statement of operations", "statements of income", "statement of income",
             "income statements", "income statement", "statements of earnings", "statement of earnings",
             "statements of comprehensive income", "statement of comprehensive income", "profit and loss"),
    BALANCE: ("balance sheets", "balance sheet", "statements of financial position", "statement of financial position",
              "statements of financial condition", "statement of financial condition", "statements of condition"),
    CASH_FLOW: ("statements of cash flows", "statement of cash flows", "cash flows statements",
                "cash flow statements", "statements of cash flow"),
    EQUITY: ("statements of shareholders' equity", "statements of stockholders' equity", "statements of equity",
             "statements of changes in equity", "statement of changes in equity",
             "statements of shareholders' investment",
             "statement of shareholders' equity", "statement of stockholders' equity"),
}

# how a question names a statement
_NAMED: dict[str, tuple[str, ...]] = {
    INCOME: ("income statement", "statement of income", "statement of operations", "statements of operations",
             "p&l", "profit and loss", "statement of earnings"),
    BALANCE: ("balance sheet", "statement of financial position", "statement of financial condition"),
    CASH_FLOW: ("cash flow statement", "statement of cash flows", "statement of cash flow", "cash flows statement"),
    EQUITY: ("statement of shareholders' equity", "statement of stockholders' equity", "statement of equity",
             "statement of changes in equity"),
}

# metrics and line items -> the statements their definitions read from
_METRICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"free cash ?flow|\bfcf\b", (CASH_FLOW,)),
    (r"cap(?:ital)? ?ex(?:penditures?)?\b|\bcapex\b|purchases? of property", (CASH_FLOW,)),
    (r"operating cash ?flow|cash (?:flow )?from operations|cash provided by operating|\bd&a\b|"
     r"depreciation and amortization|dividends? paid|share repurchases?|buybacks?", (CASH_FLOW,)),
    (r"cash conversion|free cash ?flow conversion", (CASH_FLOW, INCOME)),
    (r"days payable|\bdpo\b|days inventory|\bdio\b|days sales|\bdso\b|cash conversion cycle|\bccc\b|"
     r"inventory turnover|fixed asset turnover|asset turnover|return on assets|\broa\b|return on equity|\broe\b",
     (BALANCE, INCOME)),
    (r"working capital|current ratio|quick ratio|total (?:current )?assets|(?:current )?liabilities|"
     r"accounts payable|accounts receivable|inventor(?:y|ies)|\bpp&?e\b|property,? plant|goodwill|"
     r"total debt|long[- ]term debt|debt to|shareholders'? equity|stockholders'? equity|cash and cash equivalents",
     (BALANCE,)),
    (r"revenues?|net sales|\bsales\b|\bcogs\b|cost of (?:goods )?(?:sold|sales|revenues?)|gross (?:margin|profit)|"
     r"operating (?:income|margin|profit)|net (?:income|earnings|margin)|\beps\b|earnings per share|"
     r"interest expense|interest coverage|\bebitd?a?r?\b|\bsg&a\b|selling, general|r&d|research and development|"
     r"effective tax rate|income tax", (INCOME,)),
)


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").replace("\u2019", "'").split())


def wanted_statements(question: str) -> tuple[str, ...]:
    """The statements a question reads from: the ones it names, else those its metrics are defined on."""
    q = _norm(question)
    named = tuple(k for k in KINDS if any(n in q for n in _NAMED[k]))
    if named:
        return named
    kinds: list[str] = []
    for pattern, ks in _METRICS:
        if re.search(pattern, q):
            kinds += [k for k in ks if k not in kinds]
    return tuple(kinds)


_NUMBER = re.compile(r"^\(?\$?\(?[\d,.]+\)?%?$|^[—–-]$")


def numeric_share(text: str) -> float:
    """Share of a text's tokens that are amounts (a statement page is mostly numbers)."""
    tokens = [t for t in text.split() if t not in ("|", "$")]
    if not tokens:
        return 0.0
    return sum(1 for t in tokens if _NUMBER.match(t)) / len(tokens)


def statement_kind(head: str, text: str) -> str:
    """The statement a page is, from its first lines (``head``) and its whole ``text``; "" for any other page.
    A table of contents names every statement and is not one; a note that mentions one is not mostly numbers."""
    h = _norm(head)
    found = [k for k in KINDS if any(t in h for t in TITLES[k])]
    if len(found) != 1 or numeric_share(text) < 0.2:
        return ""
    return found[0]
