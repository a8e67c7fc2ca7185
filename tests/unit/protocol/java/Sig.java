// A request signed the way upstream's AclClientRPCHook documents it, with nothing but the JDK:
// extFields (AccessKey and SecurityToken added first) sorted by a TreeMap, every value except
// Signature's concatenated, the body appended, HmacSHA1 under the secret key, Base64.
// Run: java Sig.java  -> prints the signature of the fixed request below.
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Map;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Sig {
    public static void main(String[] args) throws Exception {
        TreeMap<String, String> ext = new TreeMap<>();
        ext.put("b", "Orders");
        ext.put("a", "pg-orders");
        ext.put("c", "TBW102");
        ext.put("d", "4");
        ext.put("e", "3");
        ext.put("f", "0");
        ext.put("g", "1700000000000");
        ext.put("h", "0");
        ext.put("i", "KEYS\u0001k-1\u0002UNIQ_KEY\u0001AC1\u0002");
        ext.put("AccessKey", "alice");
        ext.put("SecurityToken", "token-7");
        byte[] body = "h\u00e9llo, \u4e16\u754c".getBytes(StandardCharsets.UTF_8);

        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, String> e : ext.entrySet()) {
            if (!e.getKey().equals("Signature")) {
                sb.append(e.getValue());
            }
        }
        byte[] head = sb.toString().getBytes(StandardCharsets.UTF_8);
        byte[] content = new byte[head.length + body.length];
        System.arraycopy(head, 0, content, 0, head.length);
        System.arraycopy(body, 0, content, head.length, body.length);

        Mac mac = Mac.getInstance("HmacSHA1");
        mac.init(new SecretKeySpec("alice-secret".getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
        String signature = Base64.getEncoder().encodeToString(mac.doFinal(content));
        System.out.println(signature);
    }
}
