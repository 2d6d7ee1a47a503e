"""Structure routing: explicit pages, sections, tables/figures and file names fetch chunks by metadata."""

from __future__ import annotations

import pytest
from haystack import Document

from connectors.sqlite_store import SQLiteDocumentStore
from connectors.store_api import ScopeRequiredError
from pipelines.components.structure_router import StructureRouter, parse_refs, strip_refs


def _chunk(scope, doc_id, i, page, content, *, section="", section_id="", etype="text", label="", file="hb.pdf"):
    return Document(
        id=f"{doc_id}:{i:05d}",
        content=content,
        meta={
            "scope": scope,
            "doc_id": doc_id,
            "file_name": file,
            "page_start": page,
            "page_end": page,
            "section": section,
            "section_id": section_id,
            "element_type": etype,
            "label": label,
            "chunk_index": i,
            "sha256": "0" * 64,
            "uploaded_by": "",
            "uploaded_at": "2024-03-01T00:00:00Z",
        },
    )


@pytest.fixture
def store(tmp_path):
    s = SQLiteDocumentStore(tmp_path / "chunks.sqlite3", embedding_dim=4)
    s.write_documents(
        [
            _chunk("local", "hb", 0, 1, "Founded in 1994 in Leeds.", section="1 Introduction", section_id="1"),
            _chunk(
                "local", "hb", 1, 4, "Annual leave is 25 days.", section="4 Leave > 4.1 Annual leave", section_id="4.1"
            ),
            _chunk(
                "local",
                "hb",
                2,
                5,
                "The primary carer receives 26 weeks.",
                section="4 Leave > 4.2 Parental leave",
                section_id="4.2",
            ),
            _chunk("local", "hb", 3, 6, "Remote work up to 3 days.", section="5 Remote work", section_id="5"),
            _chunk(
                "local",
                "hb",
                4,
                9,
                "Year | Revenue\n2022 | 97.5",
                section="7 Finance",
                section_id="7",
                etype="table",
                label="Table 2",
            ),
            _chunk(
                "local",
                "ct",
                0,
                4,
                "ARTICLE IV Term. The initial term is 36 months.",
                section="ARTICLE IV Term",
                section_id="IV",
                file="services_agreement.pdf",
            ),
            # another scope with the same pages and labels: must never come back
            _chunk(
                "slack:T1:C9",
                "zz",
                0,
                5,
                "Secret parental leave text.",
                section="4 Leave > 4.2 Parental leave",
                section_id="4.2",
                file="secret.pdf",
            ),
            _chunk("slack:T1:C9", "zz", 1, 9, "Secret table", etype="table", label="Table 2", file="secret.pdf"),
        ]
    )
    return s


class TestStructureRouter:
    def test_init_validates(self, store):
        with pytest.raises(ValueError, match="document_store"):
            StructureRouter(document_store=None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="fetch_limit"):
            StructureRouter(document_store=store, fetch_limit=0)

    def test_to_dict_and_from_dict(self, store):
        d = StructureRouter(document_store=store, fetch_limit=12).to_dict()
        assert d["type"] == "pipelines.components.structure_router.StructureRouter"
        assert d["init_parameters"]["fetch_limit"] == 12
        assert d["init_parameters"]["document_store"] == store.to_dict()
        back = StructureRouter.from_dict(d)
        assert back.fetch_limit == 12
        assert isinstance(back.document_store, SQLiteDocumentStore)

    @pytest.mark.parametrize(
        ("question", "pages"),
        [
            ("What does page 5 say?", [5]),
            ("summarize pp. 4-5", [4, 5]),
            ("Summarise pages 4 to 6 please", [4, 5, 6]),
            ("what is on pages 5–6", [5, 6]),
        ],
    )
    def test_run_pages(self, store, question, pages):
        out = StructureRouter(document_store=store).run(question=question, scopes=["local"])
        got = sorted({d.meta["page_start"] for d in out["documents"]})
        assert got == pages
        assert all(d.meta["scope"] == "local" for d in out["documents"])

    @pytest.mark.parametrize(
        ("question", "ids"),
        [
            ("What does section 4.2 say?", ["hb:00002"]),
            ("§ 4.2 in short?", ["hb:00002"]),
            ("§4.1?", ["hb:00001"]),
            ("What does Section 5 say about remote work?", ["hb:00003"]),
            ("In Article IV, how long is the term?", ["ct:00000"]),
        ],
    )
    def test_run_sections(self, store, question, ids):
        out = StructureRouter(document_store=store).run(question=question, scopes=["local"])
        assert [d.id for d in out["documents"]] == ids

    def test_run_table_label(self, store):
        out = StructureRouter(document_store=store).run(question="Which year in table 2 is best?", scopes=["local"])
        assert [d.id for d in out["documents"]] == ["hb:00004"]
        assert out["reference"] == "Table 2"

    @pytest.mark.parametrize(
        ("question", "pages"),
        [
            ("What type of court is noted on the cover page?", [1]),
            ("How many people are in the images on the cover?", [1]),
            ("What is the name of the governor on the first page?", [1]),
            ("What are the words on page two?", []),  # "page two" is page 2, and hb has no page 2
            ("What does the fourth page say?", [4, 4]),  # page 4 of both documents
            ("What is on the last page of the services agreement?", [4]),
            ("What is printed on the back cover?", [9, 4]),  # each document's own last page
        ],
    )
    def test_pages_counted_from_either_end(self, store, question, pages):
        out = StructureRouter(document_store=store).run(question=question, scopes=["local"])
        got = [d.meta["page_start"] for d in out["documents"]]
        assert sorted(got) == sorted(pages)
        assert all(d.meta["scope"] == "local" for d in out["documents"])

    def test_the_last_page_follows_an_upload_made_after_the_last_question(self, store):
        router = StructureRouter(document_store=store)
        first = router.run(question="What is printed on the back cover?", scopes=["local"])["documents"]
        assert sorted(d.meta["page_start"] for d in first) == [4, 9]
        store.write_documents([_chunk("local", "nw", 0, 3, "Signed in Leeds.", file="signatures.pdf")])
        again = router.run(question="What is printed on the back cover?", scopes=["local"])["documents"]
        assert sorted(d.meta["page_start"] for d in again) == [3, 4, 9]

    def test_a_cover_that_is_not_a_page_routes_nowhere(self, store):
        out = StructureRouter(document_store=store).run(question="What does the policy cover?", scopes=["local"])
        assert out["documents"] == [] and out["explicit"] is False

    def test_run_file_name_restricts(self, store):
        router = StructureRouter(document_store=store)
        out = router.run(question="What is on page 4 of the services agreement?", scopes=["local"])
        assert [d.id for d in out["documents"]] == ["ct:00000"]
        assert out["filters"] == {"field": "meta.file_name", "operator": "in", "value": ["services_agreement.pdf"]}
        assert out["content_question"] == "What is on of ?"
        assert out["explicit"] is True
        out = router.run(question="page 4 of services_agreement.pdf", scopes=["local"])
        assert [d.id for d in out["documents"]] == ["ct:00000"]
        # two or more consecutive words of a longer name name it too
        out = router.run(question="How long is the term in the Services Agreement?", scopes=["local"])
        assert out["filters"]["value"] == ["services_agreement.pdf"]
        assert out["content_question"] == "How long is the term in ?" and out["explicit"] is False

    @pytest.mark.parametrize(
        "question",
        ["What is on page 4 of the services document?", "What is on page 4 of services?", "page 4 of the services pdf"],
    )
    def test_one_word_of_a_name_said_as_a_document_picks_its_page(self, store, question):
        # hb.pdf has a page 4 too: the word names the document whose page 4 is meant
        out = StructureRouter(document_store=store).run(question=question, scopes=["local"])
        assert [d.id for d in out["documents"]] == ["ct:00000"]
        assert out["reference"] == "page 4 of services_agreement.pdf"

    @pytest.mark.parametrize(
        ("question", "scopes"),
        [
            ("What is on page 4 of this document?", ["local"]),  # a kind of document names none
            ("What is on page 4 of the report?", ["local"]),
            ("What is on page 4 of the secret document?", ["local"]),  # a file of another channel
        ],
    )
    def test_words_that_name_no_file_of_the_scope_restrict_nothing(self, store, question, scopes):
        out = StructureRouter(document_store=store).run(question=question, scopes=scopes)
        assert out["filters"] is None
        assert sorted(d.id for d in out["documents"]) == ["ct:00000", "hb:00001"]

    def test_run_never_crosses_scopes(self, store):
        router = StructureRouter(document_store=store)
        out = router.run(question="table 2 and section 4.2 of secret.pdf", scopes=["local"])
        assert all(d.meta["scope"] == "local" for d in out["documents"])
        assert out["filters"] is None  # secret.pdf is not a file of this scope
        out = router.run(question="section 4.2", scopes=["slack:T1:C9"])
        assert [d.id for d in out["documents"]] == ["zz:00000"]
        with pytest.raises(ScopeRequiredError):
            router.run(question="page 5", scopes=[])

    def test_run_no_reference(self, store):
        out = StructureRouter(document_store=store).run(question="How long is parental leave?", scopes=["local"])
        assert out["documents"] == [] and out["filters"] is None and out["reference"] == ""
        assert out["content_question"] == "How long is parental leave?" and out["explicit"] is False

    def test_heading_words_fetch_the_section(self, store):
        router = StructureRouter(document_store=store)
        hits = store.fetch(scopes=["local"], filters={"field": "meta.section_id", "operator": "==", "value": "4.2"})
        docs, heading = router.heading_documents("What does the parental leave section say?", ["local"], hits)
        assert [d.id for d in docs] == ["hb:00002"] and heading == "4.2 Parental leave"
        assert router.heading_documents("How many trucks?", ["local"], hits) == ([], "")

    @pytest.mark.parametrize(
        ("heading", "question"),
        [
            ("Fiscal 2022", "What were total assets at the end of fiscal 2022?"),
            ("Year Ended December 31, 2022", "What was revenue for the year ended December 31, 2022?"),
            ("2 Fourth Quarter and Fiscal Year Results", "What was fourth quarter fiscal year revenue?"),
        ],
    )
    def test_period_words_match_no_heading(self, heading, question):
        """A filing's every page is about its fiscal year: a section titled by the period is not what is asked."""
        hit = _chunk("local", "tk", 0, 2, "In fiscal 2022 we opened twelve stores.", section=heading, section_id="")
        assert StructureRouter(document_store=_NoStore()).heading_documents(question, ["local"], [hit]) == ([], "")


class _NoStore:
    """A store heading routing never touches (it reads the retrieved candidates only)."""


@pytest.mark.parametrize(
    ("question", "pages", "sections", "labels", "stripped"),
    [
        ("Summarize pages 5-7", (5, 7), (), (), "Summarize"),
        ("what's on p. 12?", (12, 12), (), (), "what's on ?"),
        ("Explain section 4.2 and table 3", None, ("4.2",), ("Table 3",), "Explain and"),
        ("Figure 2 in Article IV", None, ("IV",), ("Figure 2",), "in"),
        ("clause 7.1 governing law", None, ("7.1",), (), "governing law"),
        ("How many pages does it have?", None, (), (), "How many pages does it have?"),
        ("What is on page two?", (2, 2), (), (), "What is on ?"),
        ("What is the fax number on page fourteen?", (14, 14), (), (), "What is the fax number on ?"),
        ("Who signed on page twenty-one?", (21, 21), (), (), "Who signed on ?"),
    ],
)
def test_parse_refs(question, pages, sections, labels, stripped):
    refs = parse_refs(question)
    assert refs.pages == pages
    assert refs.section_ids == sections
    assert refs.labels == labels
    assert strip_refs(question, refs) == stripped


class TestRoutingByWhatADocumentSays:
    """Files whose names say nothing are routed by the issuer and period read off their covers at ingest."""

    FILINGS = {  # neutral name -> (doc_* metadata of its cover)
        "filing-01.pdf": {"doc_issuer": "Brightwater Pumps, Inc.", "doc_form": "10-K", "doc_year": 2021},
        "filing-02.pdf": {"doc_issuer": "Brightwater Pumps, Inc.", "doc_form": "10-K", "doc_year": 2023},
        "filing-03.pdf": {"doc_issuer": "Kestrel Foods & Co.", "doc_form": "10-Q", "doc_year": 2023, "doc_quarter": 2},
        "download (3).pdf": {"doc_issuer": "Advanced Micro Devices, Inc.", "doc_form": "10-K", "doc_year": 2023},
        "notes.pdf": {},
    }

    @pytest.fixture
    def router(self, tmp_path):
        s = SQLiteDocumentStore(tmp_path / "chunks.sqlite3", embedding_dim=4)
        docs = []
        for n, (name, ident) in enumerate(self.FILINGS.items()):
            d = _chunk("local", f"d{n}", 0, 1, f"Revenue grew in {name}.", file=name)
            docs.append(Document(id=d.id, content=d.content, meta={**d.meta, **ident}))
        # another channel's filing of the same company: never read from a question asked here
        d = _chunk("slack:T:other", "x", 0, 1, "Hidden.", file="filing-09.pdf")
        docs.append(Document(id=d.id, content=d.content, meta={**d.meta, "doc_issuer": "Brightwater Pumps, Inc.",
                                                               "doc_form": "10-K", "doc_year": 2023}))
        s.write_documents(docs)
        return StructureRouter(document_store=s)

    @pytest.mark.parametrize(
        ("question", "files"),
        [
            ("What was Brightwater Pumps' revenue in FY2023?", ["filing-02.pdf"]),
            ("What was Brightwater's revenue in FY2021?", ["filing-01.pdf"]),
            ("How did Kestrel Foods do in Q2 2023?", ["filing-03.pdf"]),
            ("What did AMD spend on research in 2023?", ["download (3).pdf"]),
        ],
    )
    def test_a_question_naming_the_company_reads_its_neutrally_named_filing(self, router, question, files):
        out = router.run(question=question, scopes=["local"])
        assert out["filters"] == {"field": "meta.file_name", "operator": "in", "value": files}

    def test_identity_is_read_only_within_the_askers_scopes(self, router):
        assert router.company_files("Brightwater Pumps revenue 2023", ["local"]) == ["filing-01.pdf",
                                                                                     "filing-02.pdf"]
        assert "filing-09.pdf" not in router.aliases(["local"])
        assert router.aliases(["slack:T:other"]) == {"filing-09.pdf": "Brightwater Pumps_2023_10K"}
