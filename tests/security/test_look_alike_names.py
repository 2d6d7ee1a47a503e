

@pytest.mark.slow
def test_on_the_command_line_a_look_alike_from_another_path_is_kept_beside_and_replaces_only_itself(
    tmp_path: Path,
) -> None:
    """The command line's rule (a path is a file's identity, ``same_source_only``) with look-alike names: a
    ``hаndbook.pdf`` (Cyrillic а) from another folder is indexed beside ``a/handbook.pdf`` as ``hаndbook (2).pdf``,
    never replacing it although the command line runs as an admin; the same path again replaces only its own copy."""
    service = ChatCore.from_settings(Settings(data_dir=tmp_path / "data", ocr_enabled=False)).service
    asked: list[str] = []

    def admin() -> bool:
        asked.append("admin?")
        return True

    def ingest(path: str, days: str) -> Any:
        return service.ingest(_policy(days), file_name=path.rsplit("/", 1)[-1], scope="local", is_admin=admin,
                              source_url=f"file://{path}", same_source_only=True)

    first = ingest("/a/handbook.pdf", "sixteen weeks")
    fake = ingest("/b/hаndbook.pdf", "two days")
    assert fake.status == "indexed" and fake.file == "hаndbook (2).pdf" and fake.renamed_from == "hаndbook.pdf"
    assert fake.replaced_doc_id is None
    again = ingest("/b/hаndbook.pdf", "three days")
    assert again.file == "hаndbook (2).pdf" and again.replaced_doc_id == fake.doc_id
    same = ingest("/a/handbook.pdf", "seventeen weeks")
    assert same.file == "handbook.pdf" and same.replaced_doc_id == first.doc_id
    assert sorted(d.file for d in service.list_documents("local")) == ["handbook.pdf", "hаndbook (2).pdf"]
    assert asked == []  # on the command line no one is asked to be an admin: a path never replaces another's file
