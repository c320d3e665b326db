package org.apache.kafka.common.utils;

/**
 * Stands in for the class Kafka 4.4 moved to org.apache.kafka.common.utils.internals: kafka-shell
 * 4.3.1 (the newest on Maven Central) calls these two methods by the old name. Both pass through.
 */
public final class Exit {
    private Exit() { }

    public static void exit(int statusCode) {
        org.apache.kafka.common.utils.internals.Exit.exit(statusCode);
    }

    public static void addShutdownHook(String name, Runnable runnable) {
        org.apache.kafka.common.utils.internals.Exit.addShutdownHook(name, runnable);
    }
}
