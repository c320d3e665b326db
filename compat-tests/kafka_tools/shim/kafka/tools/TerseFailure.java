package kafka.tools;

/**
 * Stands in for a class Kafka 4.4 dropped: kafka-shell 4.3.1 (the newest on Maven Central) names it
 * in a catch clause of MetadataShell.main, so the JVM must find it to load that method. Nothing on
 * the 4.4 classpath throws it.
 */
public class TerseFailure extends RuntimeException {
    public TerseFailure(String message) {
        super(message);
    }
}
