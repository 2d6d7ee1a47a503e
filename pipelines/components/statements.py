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
from dataclasses import dataclass, replace

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

# how a search names each statement: the words of its usual titles, so "Consolidated Statements of Earnings" is
# found as readily as "…of Operations"
SEARCH_WORDS: dict[str, str] = {INCOME: "statements of operations income earnings",
                                BALANCE: "balance sheets financial position", CASH_FLOW: "statements of cash flows",
                                EQUITY: "statements of shareholders' stockholders' equity"}
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
     r"depreciation and amortization|dividends? paid|share repurchases?|buybacks?|investing activities|"
     r"financing activities", (CASH_FLOW,)),
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


# --- line items: how a question names one, and how a statement's row labels it ----------------------------------
# After the US-GAAP taxonomy's standard labels (the element each follows is named), with the variants 10-K/10-Q
# statements print. ``asked``: how a question names the item; ``row``: the row's label cell (lower case, straight
# apostrophes); ``unless``: labels that look alike but are another item ("total liabilities" is not "total current
# liabilities", "cost of revenue" is not "revenue"). Specific items come before general ones: the first item whose
# ``asked`` pattern the question matches is the one it asks for.


@dataclass(frozen=True)
class LineItem:
    """A statement line item: its ``name``, how a question names it and how a statement's row labels it."""

    name: str
    asked: str
    row: str
    unless: str = ""


LINE_ITEMS: tuple[LineItem, ...] = (
    LineItem("total current liabilities", r"(?:total )?current liabilities",  # LiabilitiesCurrent
             r"^total current liabilities"),
    LineItem("total current assets", r"(?:total )?current assets", r"^total current assets"),  # AssetsCurrent
    LineItem("total liabilities", r"total liabilities(?! and)", r"^total liabilities$", "equity"),  # Liabilities
    LineItem("total assets", r"total assets", r"^total assets$"),  # Assets
    LineItem("shareholders' equity", r"(?:shareholders|stockholders|share ?owners)'? equity|total equity",
             r"^total (?:shareholders'?|stockholders'?|share ?owners'?) equity|^total equity$",  # StockholdersEquity
             "liabilities and"),
    LineItem("cash from operations", r"cash (?:flows? )?(?:provided by |from |generated (?:by|from) )?operati|"
             r"operating cash ?flows?",  # NetCashProvidedByUsedInOperatingActivities
             r"net cash.{0,40}operating activities|cash (?:provided by|generated from|from) operations|"
             r"^cash flows? from operating activities$|^cash (?:provided|generated|used).{0,20} (?:by|from|in) "
             r"operati"),
    # NetCashProvidedByUsedInInvestingActivities, NetCashProvidedByUsedInFinancingActivities
    LineItem("cash from investing", r"\bcash\b.{0,25}\binvesting activities|investing cash ?flows?",
             r"^(?:net )?cash.{0,40}investing activities"),
    LineItem("cash from financing", r"\bcash\b.{0,25}\bfinancing activities|financing cash ?flows?",
             r"^(?:net )?cash.{0,40}financing activities"),
    LineItem("capital expenditure", r"cap(?:ital)? ?ex(?:penditures?)?\b|\bcapex\b|purchases? of property|"
             r"(?:payments|spending) (?:for|on) (?:property|pp&e)",  # PaymentsToAcquirePropertyPlantAndEquipment
             r"purchases? of property|capital expenditures?|additions to property|"
             r"payments for (?:acquisitions? of )?property|purchases? of (?:fixed|capital) assets|"
             r"acquisitions? of property|purchases? of land|land, buildings|capital spending|"
             r"capital investments?$|expenditures for property"),
    LineItem("depreciation and amortization", r"depreciation(?: and amortization|, depletion)?|\bd&a\b",
             r"^depreciation(?:,| and) (?:depletion and )?amortization|^depreciation\b"),
    LineItem("dividends paid", r"dividends? paid|paid (?:in )?dividends|dividend payments?",  # PaymentsOfDividends
             r"dividends paid|cash dividends|payments? (?:of|for) dividends"),
    LineItem("cash and equivalents", r"cash and (?:cash )?equivalents",  # CashAndCashEquivalentsAtCarryingValue
             r"^cash and cash equivalents(?:,? (?:at )?end of (?:the )?(?:year|period))?$",
             "restricted|beginning"),
    LineItem("short-term investments", r"short[- ]term investments|marketable securities",
             r"short-term investments|marketable securities"),
    LineItem("receivables", r"(?:accounts |trade )?receivables?",  # AccountsReceivableNetCurrent
             r"^(?:trade )?(?:accounts|notes|trade) receivables?|^receivables"),
    LineItem("inventory", r"inventor(?:y|ies)", r"^(?:merchandise )?inventor(?:y|ies)"),  # InventoryNet
    LineItem("accounts payable", r"accounts payable|trade payables?",  # AccountsPayableCurrent
             r"^(?:accounts|trade) payables?"),
    LineItem("net PP&E", r"\bpp(?:&|n)?e\b|property,? plant|property and equipment|fixed assets",
             r"property(?:,)? (?:plant )?and equipment(?:,)? net|^net property|^property(?:,)? (?:plant )?and "
             r"equipment(?:,)? (?:at cost, )?less accumulated|"
             # a balance sheet that prints only the net amount labels it bare ("Property, plant and equipment")
             r"^property(?:,)? (?:plant,? )?and equipment$"),  # PropertyPlantAndEquipmentNet
    LineItem("goodwill", r"\bgoodwill\b", r"^goodwill\b", "impairment|accumulated|acquired|amortization"),  # Goodwill
    # "has it increased its debt on balance sheet": the borrowing a balance sheet carries beyond the year ("total
    # debt" is left to a ratio's own definition: "interest to average total debt")
    LineItem("long-term debt", r"long[- ]term debt|\bits debt\b(?! securities)|\bdebt on (?:its |the )?"
             r"balance sheet",  # LongTermDebtNoncurrent
             r"^long-term debt"),
    LineItem("cost of goods sold", r"cost of (?:goods sold|sales|revenues?|products sold)|\bcogs\b",
             r"^(?:total )?cost of (?:goods sold|sales|revenues?|products sold)"),  # CostOfGoodsAndServicesSold
    LineItem("gross profit", r"gross profit", r"^gross (?:profit|margin)$"),  # GrossProfit
    LineItem("research and development", r"research and development|\br&d\b",  # ResearchAndDevelopmentExpense
             r"^research and development"),
    LineItem("selling, general and administrative",  # SellingGeneralAndAdministrativeExpense
             r"\bsg&a\b|selling,? general,? (?:and|&) administrative",
             r"^(?:total )?selling,? (?:general,? )?(?:and|&) administrative"),
    LineItem("operating income", r"operating (?:income|profit)|income from operations",  # OperatingIncomeLoss
             r"^(?:total )?operating (?:income|profit)|^income from operations", "per share|margin"),
    LineItem("income before taxes", r"(?:income|earnings) before (?:income )?tax|pre-?tax income",
             r"(?:income|earnings) (?:\(loss\) )?before (?:provision for )?income tax|^pre-?tax (?:income|earnings)"),
    # a rate the income statement's discussion or the tax note prints as its own row; the metric below computes it
    # where no page does
    LineItem("effective tax rate", r"effective (?:income )?tax rate", r"^effective (?:income )?tax rate"),
    LineItem("income tax expense", r"income tax (?:expense|provision)|provision for income tax|tax expense",
             r"^(?:provision for|\(?benefit from\)?|provision \(benefit\) for) income tax|"
             r"^income tax (?:expense|provision)"),  # IncomeTaxExpenseBenefit
    LineItem("interest expense", r"interest expense", r"^interest expense"),  # InterestExpense
    LineItem("basic EPS",  # EarningsPerShareBasic
             r"basic (?:eps|(?:earnings|net income) per (?:common |ordinary )?share)",
             r"^basic(?: net)? (?:income|earnings) per (?:common |ordinary )?share|^basic$|"
             r"^(?:net )?(?:income|earnings) per (?:common |ordinary )?share.{0,20}basic"),
    LineItem("diluted EPS", r"diluted (?:eps|(?:earnings|net income) per (?:common |ordinary )?share)|"
             r"earnings per (?:diluted |common |ordinary )?share|\beps\b",  # EarningsPerShareDiluted
             r"^diluted(?: net)? (?:income|earnings) per (?:common |ordinary )?share|^diluted$|"
             r"^(?:net )?(?:income|earnings) per (?:common |ordinary )?share.{0,20}diluted"),
    LineItem("net income", r"net (?:income|earnings|profit)(?! margin)|\bprofits?\b(?! margin)",  # NetIncomeLoss
             r"^(?:consolidated )?net (?:income|earnings)(?: \(loss\))?(?: attributable to [\w .,&'-]+)?$",
             "noncontrolling|non-controlling|per share|comprehensive"),
    LineItem("revenue", r"\b(?:total |net )?(?:revenues?|net sales|sales|turnover|top line)\b",  # Revenues
             r"^(?:total )?(?:net )?(?:revenues?|sales)\b|^net sales|^total net sales|^total (?:net )?revenues?",
             "cost of|deferred|unearned|\\bper\\b|marketing|general|administrative|returns"),
)
_LINES: dict[str, str] = {item.name: item.row for item in LINE_ITEMS}


def asked_item(question: str) -> LineItem | None:
    """The line item a question asks for (the first in :data:`LINE_ITEMS` whose wording it uses), or None."""
    q = _norm(question)
    return next((item for item in LINE_ITEMS if re.search(item.asked, q)), None)


MAX_LABEL_WORDS = 16  # "Net cash provided by (used in) operating activities of continuing operations" is 11


def row_is(item: LineItem, label: str, group: str = "") -> bool:
    """Whether a row's label cell is ``item`` ("Purchases of property and equipment" is capital expenditure), read
    with the line that groups it: under "Earnings per common share––diluted:" (or "…per common share:" then
    "Diluted") a row is diluted EPS, whatever its label says ("Net income attributable to Pfizer Inc. common
    shareholders" there is a figure per share, not net income); a bare "Basic" under "Weighted average common shares
    outstanding:" is a share count."""
    low = _norm(label)
    if len(low.split()) > MAX_LABEL_WORDS:  # a sentence of prose that names the line, not its row
        return False
    grouped_by = _norm(group)
    if re.search(r"per (?:common |ordinary )?share|\beps\b", grouped_by):
        which = item.name.split()[0] if item.name in ("basic EPS", "diluted EPS") else ""
        return bool(which) and (which in grouped_by or which in low) and \
            re.search(r"^(?:basic|diluted)$|net (?:income|earnings)", low) is not None
    if low in ("basic", "diluted") and grouped_by:
        return False
    return re.search(item.row, low) is not None and not (item.unless and re.search(item.unless, low))


@dataclass(frozen=True)
class Formula:
    """A metric that no statement prints: its ``name``, its definition as a reader reads it (``formula``), and as
    arithmetic over line items (``expr``, see :mod:`pipelines.figures.arithmetic`: ``{item}`` the year's figure,
    ``avg({item})`` the mean of that year's and the year before's); ``percent``: the result is shown × 100, "%";
    ``printed``: the line item a filing prints the metric as, in percent ("Effective tax rate | 21.6 %"), read
    before computing it: the filer's own figure, on the page that states it."""

    name: str
    formula: str
    expr: str
    percent: bool = False
    printed: str = ""

    @property
    def lines(self) -> tuple[str, ...]:
        """The line items it is computed from, in the order the formula names them."""
        return tuple(dict.fromkeys(re.findall(r"\{([^{}]+)\}", self.expr)))


_DIO = "365 * avg({inventory}) / {cost of goods sold}"
_DSO = "365 * avg({receivables}) / {revenue}"
_DPO = "365 * avg({accounts payable}) / {cost of goods sold}"
# (how a question names the metric, the formula); specific before general ("fixed asset turnover" before
# "asset turnover", "operating cash flow ratio" before "free cash flow"); definitions after CFA Institute's
# financial-analysis curriculum, like _METRICS above, with the average of the opening and closing balance for a
# balance-sheet figure divided by a flow (turnover, return, days)
FORMULAS: tuple[tuple[str, Formula], ...] = (
    (r"operating cash ?flow ratio", Formula("the operating cash flow ratio",
                                            "cash from operations ÷ total current liabilities",
                                            "{cash from operations} / {total current liabilities}")),
    (r"(?:free cash ?flow|fcf) conversion", Formula("free cash flow conversion",
                                                    "(cash from operations − capital expenditure) ÷ net income",
                                                    "({cash from operations} - {capital expenditure}) / {net income}"
                                                    " * 100", percent=True)),
    (r"free cash ?flow|\bfcf\b", Formula("free cash flow", "cash from operations − capital expenditure",
                                         "{cash from operations} - {capital expenditure}")),
    (r"cash conversion cycle|\bccc\b", Formula(
        "the cash conversion cycle", "days inventory + days sales outstanding − days payable outstanding",
        f"({_DIO}) + ({_DSO}) - ({_DPO})")),
    (r"days payable|\bdpo\b", Formula("days payable outstanding",
                                      "365 × average accounts payable ÷ cost of goods sold", _DPO)),
    (r"days (?:of )?inventory|\bdio\b", Formula("days inventory outstanding",
                                               "365 × average inventory ÷ cost of goods sold", _DIO)),
    (r"days sales outstanding|\bdso\b", Formula("days sales outstanding",
                                               "365 × average receivables ÷ revenue", _DSO)),
    (r"inventory turnover", Formula("inventory turnover", "cost of goods sold ÷ average inventory",
                                    "{cost of goods sold} / avg({inventory})")),
    (r"fixed asset turnover", Formula("fixed asset turnover", "revenue ÷ average net PP&E",
                                      "{revenue} / avg({net PP&E})")),
    (r"asset turnover", Formula("asset turnover", "revenue ÷ average total assets",
                                "{revenue} / avg({total assets})")),
    (r"return on (?:total )?assets|\broa\b", Formula("return on assets", "net income ÷ average total assets",
                                                     "{net income} / avg({total assets})")),
    (r"return on (?:shareholders'? |stockholders'? )?equity|\broe\b", Formula(
        "return on equity", "net income ÷ average shareholders' equity",
        "{net income} / avg({shareholders' equity})")),
    (r"quick ratio", Formula("the quick ratio", "(cash and equivalents + short-term investments + receivables)"
                                                " ÷ total current liabilities",
                             "({cash and equivalents} + {short-term investments} + {receivables})"
                             " / {total current liabilities}")),
    (r"current ratio|working capital ratio", Formula("the current ratio",
                                                     "total current assets ÷ total current liabilities",
                                                     "{total current assets} / {total current liabilities}")),
    (r"working capital", Formula("working capital", "total current assets − total current liabilities",
                                 "{total current assets} - {total current liabilities}")),
    (r"retention ratio", Formula("the retention ratio", "(net income − dividends paid) ÷ net income",
                                 "({net income} - {dividends paid}) / {net income}")),
    (r"(?:dividend )?payout ratio", Formula("the dividend payout ratio", "dividends paid ÷ net income",
                                            "{dividends paid} / {net income}")),
    (r"\bebitda\b.{0,20}(?:margin|%)|(?:margin|%).{0,20}\bebitda\b", Formula(
        "the EBITDA margin", "(operating income + depreciation and amortization) ÷ revenue",
        "({operating income} + {depreciation and amortization}) / {revenue} * 100", percent=True)),
    (r"\bebitda\b", Formula("EBITDA", "operating income + depreciation and amortization",
                            "{operating income} + {depreciation and amortization}")),
    (r"gross (?:profit )?margin", Formula("the gross margin", "(revenue − cost of goods sold) ÷ revenue",
                                          "({revenue} - {cost of goods sold}) / {revenue} * 100", percent=True)),
    (r"operating (?:profit |income )?(?:% )?margin", Formula("the operating margin", "operating income ÷ revenue",
                                                            "{operating income} / {revenue} * 100", percent=True)),
    (r"net (?:profit |income )?margin|profit margin", Formula("the net margin", "net income ÷ revenue",
                                                              "{net income} / {revenue} * 100", percent=True)),
    (r"effective tax rate", Formula("the effective tax rate", "income tax expense ÷ income before taxes",
                                    "{income tax expense} / {income before taxes} * 100", percent=True,
                                    printed="effective tax rate")),
    (r"interest coverage", Formula("interest coverage", "operating income ÷ interest expense",
                                   "{operating income} / {interest expense}")),
    (r"(?:capex|capital expenditures?).{0,40}(?:%|percent|ratio|share) of (?:total )?(?:revenue|sales)", Formula(
        "capital expenditure as a share of revenue", "capital expenditure ÷ revenue",
        "{capital expenditure} / {revenue} * 100", percent=True)),
    (r"(?:cogs|cost of (?:goods sold|sales|revenues?)).{0,40}(?:%|percent|share) of (?:total )?(?:revenue|sales)",
     Formula("cost of goods sold as a share of revenue", "cost of goods sold ÷ revenue",
             "{cost of goods sold} / {revenue} * 100", percent=True)),
    (r"debt[- ]to[- ]equity", Formula("debt to equity", "long-term debt ÷ shareholders' equity",
                                      "{long-term debt} / {shareholders' equity}")),
)


_DPO_PURCHASES = "365 * avg({accounts payable}) / ({cost of goods sold} + {inventory} - prev({inventory}))"
# a question that defines days payable over purchases ("COGS + change in inventory"), as analysts often do
_PURCHASES = re.compile(r"(?:\bcogs\b|cost of (?:goods sold|sales))\s*\)?\s*\+\s*(?:the )?change in inventor", re.I)


def formula_for(question: str) -> Formula | None:
    """The computed metric a question asks for, or None (a look-up, or a metric a statement prints). Where the
    question defines days payable over purchases (cost of goods sold plus the change in inventory), its definition
    is used."""
    q = _norm(question)
    found = next((f for pattern, f in FORMULAS if re.search(pattern, q)), None)
    if found is not None and _DPO in found.expr and _PURCHASES.search(question):
        formula = found.formula.replace("average accounts payable ÷ cost of goods sold",
                                        "average accounts payable ÷ (cost of goods sold + change in inventory)")
        return replace(found, formula=formula, expr=found.expr.replace(_DPO, _DPO_PURCHASES))
    return found


def is_line(label: str, line: str) -> bool:
    """Whether a table row's label is the statement line ``line`` (a name in the formulas):
    "Purchases of property and equipment" is "capital expenditure"."""
    return re.search(_LINES[line], _norm(label)) is not None


def line_item(name: str) -> LineItem:
    """The line item called ``name`` (a name a formula lists)."""
    return next(item for item in LINE_ITEMS if item.name == name)
