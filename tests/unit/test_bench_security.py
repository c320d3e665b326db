"""benchmarks/security.py's arithmetic and settings (the brokers themselves run in the benchmark)."""

from pathlib import Path

from benchmarks.security import client_config, listener_settings, make_tls_material, markdown, summarize


def _run(broker: str, protocol: str, produce: float, consume: float, rep: int = 0) -> dict:
    return {"rep": rep, "broker": broker, "protocol": protocol, "produce": produce, "consume": consume}


def test_ratios_are_against_the_same_brokers_plaintext_and_the_same_protocol_on_kafka() -> None:
    runs = [_run("kafkapy", "PLAINTEXT", 100, 200), _run("kafkapy", "SSL", 50, 100),
            _run("kafkapy", "SSL", 70, 120, rep=1), _run("kafkapy", "PLAINTEXT", 100, 200, rep=1),
            _run("apache-kafka", "PLAINTEXT", 200, 400), _run("apache-kafka", "SSL", 120, 200)]
    summary = summarize(runs)
    assert summary["mb_s"]["kafkapy"]["SSL"] == {"produce": 60, "consume": 110}
    assert summary["vs_plaintext"]["kafkapy"]["SSL"] == {"produce": 0.6, "consume": 0.55}
    assert summary["kafkapy_vs_kafka"]["PLAINTEXT"] == {"produce": 0.5, "consume": 0.5}
    assert summary["kafkapy_vs_kafka"]["SSL"] == {"produce": 0.5, "consume": 0.55}

    class Args:
        records, size, partitions, reps = 10, 1024, 8, 2
    text = markdown(summary, Args())  # type: ignore[arg-type]
    assert "| kafkapy | SSL | 60.0 | 110.0 | 0.60 | 0.55 |" in text
    assert "| SSL | 0.50 | 0.55 |" in text


def test_one_node_serves_all_three_protocols_with_kafkas_setting_names(tmp_path: Path) -> None:
    material = make_tls_material(tmp_path)
    assert b"BEGIN PRIVATE KEY" in material.server_pem.read_bytes()  # PKCS#8, as Kafka needs
    settings = listener_settings("127.0.0.1", {"PLAINTEXT": 1, "SSL": 2, "SASL_SSL": 3}, 4, material)
    assert settings["listeners"] == ("PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2,SASL_SSL://127.0.0.1:3,"
                                     "CONTROLLER://127.0.0.1:4")
    assert settings["listener.security.protocol.map"] == \
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"
    assert 'user_bench="bench-secret"' in settings["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert client_config("PLAINTEXT", material) == {"security.protocol": "PLAINTEXT"}
    assert client_config("SASL_SSL", material)["sasl.mechanisms"] == "PLAIN"
    assert client_config("SSL", material)["ssl.ca.location"] == str(material.ca_pem)
