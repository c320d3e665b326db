package org.apache.kafka.common.utils;

import org.slf4j.Logger;

/**
 * Kafka's LocalTieredStorage (a RemoteStorageManager on a local directory) ships only in
 * kafka-storage's test jar, and the newest one Maven serves (4.3.1) names LogContext where Kafka
 * kept it before 4.4, which moved it to org.apache.kafka.common.utils.internals. This class, on
 * the RemoteStorageManager's own class path (remote.log.storage.manager.class.path, loaded child
 * first), hands its calls to the 4.4 class, so benchmarks/tiered_read.py can run that store on
 * the pinned 4.4 broker.
 */
public class LogContext {
    private final org.apache.kafka.common.utils.internals.LogContext target;

    public LogContext(String prefix) {
        target = new org.apache.kafka.common.utils.internals.LogContext(prefix);
    }

    public LogContext() {
        this("");
    }

    public Logger logger(Class<?> clazz) {
        return target.logger(clazz);
    }

    public Logger logger(String name) {
        return target.logger(name);
    }

    public String logPrefix() {
        return target.logPrefix();
    }
}
