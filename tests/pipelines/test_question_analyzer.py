"""QuestionAnalyzer: the question without instructions about the answer's form, and its specific terms."""

from __future__ import annotations

import pytest

from pipelines.components.question_analyzer import (
    QuestionAnalyzer,
    anchors,
    content_words,
    strip_instructions,
    word_forms,
)


class TestQuestionAnalyzer:
    def test_init_to_dict_from_dict(self):
        data = QuestionAnalyzer().to_dict()
        assert data == {"type": "pipelines.components.question_analyzer.QuestionAnalyzer", "init_parameters": {}}
        assert isinstance(QuestionAnalyzer.from_dict(data), QuestionAnalyzer)

    @pytest.mark.parametrize(
        ("question", "query"),
        [
            ("How many bar charts are in the report? Please write the answer in integer format.",
             "How many bar charts are in the report?"),
            ('Which years are shown? Format all of the years in a list like ["2006", "2007"]',
             "Which years are shown?"),
            ("What is the ratio for FY2023? Round your answer to three decimal places.",
             "What is the ratio for FY2023?"),
            ('Which colours appear, in descending order, e.g., ["9%","8%"] in the 2013 survey?',
             "Which colours appear, in descending order in the 2013 survey?"),
            # a question that is itself about order keeps its words
            ("List the senses in the ascending order of their bandwidth.",
             "List the senses in the ascending order of their bandwidth."),
            ("What are the core hours?", "What are the core hours?"),
        ],
    )
    def test_run_strips_answer_format_instructions(self, question, query):
        assert QuestionAnalyzer().run(question=question)["query"] == query
        assert strip_instructions(question) == query

    @pytest.mark.parametrize(
        ("question", "expected"),
        [
            ("What was the revenue of Halvorsen & Pike in 2021?", ["2021", "Halvorsen", "Pike"]),
            ("Are there counties in Florida with more than 100 deaths per 100,000 residents?",
             ["100", "100000", "Florida"]),
            ("What is the operating cash flow ratio for ADBE in FY2015?", ["2015", "ADBE"]),
            ("What is the title of the diagram on page 9?", []),  # where to look, not what it says
            ("WHAT IS THE LOGO COLOR?", []),  # shouting is not a name
        ],
    )
    def test_anchors_are_numbers_names_and_quotes(self, question, expected):
        assert anchors(question) == expected

    def test_content_words_leave_out_question_and_document_words(self):
        assert content_words("According to the report, how many dogs are allowed in the office on page 3?") == [
            "dogs", "office"]
        # how a question points at the document or its look is not what the text says
        assert content_words("How many red logos appear in the entire presentation?") == []
        assert content_words("What colour is the ITC logo on the cover, in three words?") == ["itc", "cover", "words"]

    @pytest.mark.parametrize(
        ("word", "forms"),
        [
            ("ending", {"ended", "ends", "end"}),
            ("sampled", {"sample", "samples", "sampling"}),
            ("studies", {"study", "studied"}),
            ("recommendation", {"recommend", "recommended"}),
            ("FY2015", {"FY2015"}),
        ],
    )
    def test_word_forms_find_a_word_in_any_inflection(self, word, forms):
        assert forms <= set(word_forms(word))
        assert word_forms(word)[0] in (word, word.lower())
