import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs many of Kafka's command-line tools in one JVM, so a test pays the JVM start once.
 *
 * Reads one JSON request a line from stdin: {"main": class, "args": [...], "stdin": text,
 * "timeout_s": seconds}. Answers one JSON line on stdout: {"exit_code", "stdout", "stderr"}.
 * The tools' System.out/err/in are swapped for buffers around each call, and Kafka's exit
 * procedures (and System.exit) end only the tool's thread, not the JVM; a tool that overruns its time ends the runner
 * (its thread cannot be stopped), after answering with exit_code -2.
 */
public final class ToolRunner {

    /** The exit code the running tool asked for (first call wins), and a signal that it did. */
    static final AtomicReference<Integer> EXIT_CODE = new AtomicReference<>(null);
    static volatile CountDownLatch finished = new CountDownLatch(1);
    static volatile boolean closing = false;

    /**
     * Kafka's Exit.exit/halt and System.exit land here: the code is recorded, the runner is told
     * the tool is done, and the calling thread sleeps for good. Throwing instead would run the
     * tools' own catch blocks, which print the "exception" and exit again with another code.
     */
    static void exitCalled(int code) {
        EXIT_CODE.compareAndSet(null, code);
        finished.countDown();
        while (true) {
            try {
                Thread.sleep(Long.MAX_VALUE);
            } catch (InterruptedException ignored) {
                // keep sleeping: this thread's tool has ended
            }
        }
    }

    /** Turns System.exit from a tool (argparse's --help, say) into exitCalled. */
    @SuppressWarnings("removal")
    static final class NoExit extends SecurityManager {
        @Override
        public void checkPermission(java.security.Permission perm) { }

        @Override
        public void checkPermission(java.security.Permission perm, Object context) { }

        @Override
        public void checkExit(int status) {
            if (!closing) {
                exitCalled(status);
            }
        }
    }

    public static void main(String[] argv) throws Exception {
        PrintStream realOut = System.out;
        InputStream realIn = System.in;
        ObjectMapper json = new ObjectMapper();
        Exit.setExitProcedure((code, message) -> exitCalled(code));
        Exit.setHaltProcedure((code, message) -> exitCalled(code));
        System.setSecurityManager(new NoExit());
        // Hooks would close clients the tools already closed; the runner's own end is enough.
        Exit.setShutdownHookAdder((name, runnable) -> { });
        BufferedReader requests = new BufferedReader(new InputStreamReader(realIn, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode request = json.readTree(line);
            ObjectNode answer = run(json, request);
            realOut.println(json.writeValueAsString(answer));
            realOut.flush();
            if (answer.get("exit_code").asInt() == -2) {
                closing = true;
                Runtime.getRuntime().halt(3);
            }
        }
        closing = true;
        Runtime.getRuntime().halt(0);
    }

    static ObjectNode run(ObjectMapper json, JsonNode request) throws Exception {
        String mainClass = request.get("main").asText();
        List<String> args = new ArrayList<>();
        request.get("args").forEach(a -> args.add(a.asText()));
        String stdin = request.has("stdin") ? request.get("stdin").asText() : "";
        long timeoutMs = (long) (1000 * (request.has("timeout_s") ? request.get("timeout_s").asDouble() : 60.0));

        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        InputStream oldIn = System.in;
        EXIT_CODE.set(null);
        CountDownLatch done = new CountDownLatch(1);
        finished = done;
        long start = System.nanoTime();
        PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
        System.setOut(toolOut);
        System.setErr(toolErr);
        System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
        Thread worker = new Thread(() -> {
            try {
                Method main = Class.forName(mainClass).getMethod("main", String[].class);
                main.invoke(null, (Object) args.toArray(new String[0]));
                EXIT_CODE.compareAndSet(null, 0);
            } catch (InvocationTargetException e) {
                // An uncaught exception out of main: the JVM would print it and exit 1.
                e.getCause().printStackTrace(toolErr);
                EXIT_CODE.compareAndSet(null, 1);
            } catch (Throwable e) {
                e.printStackTrace(toolErr);
                EXIT_CODE.compareAndSet(null, 1);
            }
            done.countDown();
        }, "tool-" + mainClass);
        worker.setDaemon(true);
        worker.start();
        boolean overran = !done.await(timeoutMs, TimeUnit.MILLISECONDS);
        System.out.flush();
        System.err.flush();
        System.setOut(oldOut);
        System.setErr(oldErr);
        System.setIn(oldIn);
        ObjectNode answer = json.createObjectNode();
        answer.put("exit_code", overran ? -2 : EXIT_CODE.get());
        answer.put("stdout", out.toString(StandardCharsets.UTF_8));
        answer.put("stderr", err.toString(StandardCharsets.UTF_8));
        answer.put("elapsed_s", (System.nanoTime() - start) / 1e9);
        return answer;
    }
}
