from pytest_ncp.engine.auditor import quote_in

RESPONSE = "The door creaks open.  \u201cWho goes there?\u201d the watchman calls \u2014 and Alan steps in."


def test_exact_and_normalised_quotes_match():
    assert quote_in("The door creaks open.", RESPONSE)
    assert quote_in('"who goes there?" the watchman', RESPONSE)
    assert quote_in("calls - and Alan", RESPONSE)
    assert quote_in("The door ... Alan steps in", RESPONSE)


def test_invented_or_reordered_quotes_do_not_match():
    assert not quote_in("Alan is dead", RESPONSE)
    assert not quote_in("Alan steps in ... The door", RESPONSE)
    assert not quote_in("", RESPONSE)
    assert not quote_in("  ...  ", RESPONSE)
