// Upstream's SQL92 selector as an oracle for tests/unit/protocol/test_sql92_upstream.py:
// reads lines "<expression>\t<k=v;k=v>" (\t, ; and = in values are not used by the tests;
// "-" means no properties) and prints one line per input: PARSE_ERROR <message>, or the
// evaluation result TRUE / FALSE / NULL, or EVAL_ERROR when evaluation throws.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;
import org.apache.rocketmq.filter.expression.MQFilterException;
import org.apache.rocketmq.filter.parser.SelectorParser;

public class Sql92Oracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        StringBuilder out = new StringBuilder();
        while ((line = in.readLine()) != null) {
            int tab = line.lastIndexOf('\t');
            String expr = line.substring(0, tab).replace("\\n", "\n");
            final Map<String, String> props = new HashMap<>();
            String kv = line.substring(tab + 1);
            if (!kv.equals("-")) {
                for (String pair : kv.split(";", -1)) {
                    int eq = pair.indexOf('=');
                    props.put(pair.substring(0, eq), pair.substring(eq + 1));
                }
            }
            Expression e;
            try {
                e = SelectorParser.parse(expr);
            } catch (MQFilterException ex) {
                out.append("PARSE_ERROR ").append(String.valueOf(ex.getMessage()).replace("\n", " ").replace("\r", " ")).append('\n');
                continue;
            }
            EvaluationContext ctx = new EvaluationContext() {
                public Object get(String name) { return props.get(name); }
                public Map<String, Object> keyValues() { return new HashMap<String, Object>(props); }
            };
            try {
                Object r = e.evaluate(ctx);
                out.append(r == null ? "NULL" : (r.equals(Boolean.TRUE) ? "TRUE" : (r.equals(Boolean.FALSE) ? "FALSE" : "OTHER " + r))).append('\n');
            } catch (Throwable t) {
                out.append("EVAL_ERROR ").append(String.valueOf(t).replace("\n", " ")).append('\n');
            }
        }
        System.out.print(out);
    }
}
