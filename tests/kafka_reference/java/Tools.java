import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Apache Kafka's command-line tools (kafka-topics, kafka-reassign-partitions, ...) run one after another
 * in this one JVM, as their scripts would run them: each line read on stdin is a tool's main class and its
 * arguments, separated by tabs; what the tool printed (stdout and stderr) and its exit status come back
 * as one line, "STEP status base64(output)". A tool's Exit.exit does not end the JVM: the first status
 * it gave is the tool's, and its main returns as it would after an exit that returned (the tools call
 * Exit.exit last, in main or in a finally block).
 */
public final class Tools {
    private static volatile int exited = -1;

    public static void main(String[] argv) throws Exception {
        PrintStream out = System.out;
        PrintStream err = System.err;
        Exit.setExitProcedure((status, message) -> {
            if (exited < 0) {
                exited = status;
            }
        });
        Exit.setHaltProcedure((status, message) -> {
            if (exited < 0) {
                exited = status;
            }
        });
        BufferedReader lines = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = lines.readLine()) != null) {
            String[] words = line.split("\t", -1);
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            PrintStream capture = new PrintStream(printed, true, StandardCharsets.UTF_8);
            int status = 0;
            exited = -1;
            System.setOut(capture);
            System.setErr(capture);
            try {
                Class.forName(words[0])
                    .getMethod("main", String[].class)
                    .invoke(null, (Object) Arrays.copyOfRange(words, 1, words.length));
                status = Math.max(exited, 0);
            } catch (InvocationTargetException e) {
                e.getCause().printStackTrace(capture);
                status = exited < 0 ? 99 : exited;
            } finally {
                capture.flush();
                System.setOut(out);
                System.setErr(err);
            }
            out.println("STEP " + status + " " + Base64.getEncoder().encodeToString(printed.toByteArray()));
            out.flush();
        }
    }
}
