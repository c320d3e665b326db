"""ssl.principal.mapping.rules as Kafka's SslPrincipalMapper reads them (its documented and
tested examples), and the RFC 2253 DN the rules see."""

from __future__ import annotations

import pytest
import trustme
from cryptography import x509

from kafkapy.security.ssl_principal import NoMatchingRule, SslPrincipalMapper, certificate_dn


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules_name_the_setting(rules):
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        SslPrincipalMapper(rules)


def test_rules_apply_in_order_with_case_changes():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("rules, shown", [
    ("", "[]"),
    ("DEFAULT", "[DEFAULT]"),
    ("RULE://", "[RULE:/]"),
    ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"),
    ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
    ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    (",   , , ,      , , ,   ", "[]"),
    (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
     "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]"),
])
def test_rules_are_split_as_kafka_splits_them(rules, shown):
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {shown})"


def test_an_escaped_comma_in_a_name():
    mapper = SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_matching_rule_gives_no_principal():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        SslPrincipalMapper("RULE:^CN=(.*),OU=Apps$/$1/").name("CN=x")
    assert SslPrincipalMapper("").rules == []


def test_group_references_past_the_last_group_stay_literal():
    assert SslPrincipalMapper("RULE:^CN=(\\w+)$/$1@$4/").name("CN=bob") == "bob@$4"
    assert SslPrincipalMapper("RULE:^CN=(\\w+)$/$12/").name("CN=bob") == "bob2"


def test_certificate_dn_is_rfc2253_most_specific_first():
    ca = trustme.CA()
    cert = ca.issue_cert("client.example", common_name="Alice, Jr", organization_unit_name="Apps",
                         organization_name="Example")
    der = x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes()).public_bytes(
        __import__("cryptography.hazmat.primitives.serialization", fromlist=["Encoding"]).Encoding.DER)
    assert certificate_dn(der) == "CN=Alice\\, Jr,OU=Apps,O=Example"
