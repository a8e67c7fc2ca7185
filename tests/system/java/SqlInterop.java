// Apache RocketMQ 5.2.0's Java client against a rocketrio NameServer and broker, for
// tests/system/test_interop_sql92.py: a producer sends 20 messages with the property n = 0..19;
// a push consumer subscribed with MessageSelector.bySql(args[2]) prints what it receives;
// a consumer with the selector args[3] (one that does not compile) prints how start() fails.
// Prints one JSON line: {"received": [...], "bad_start": "<code> <message>"}.
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentSkipListSet;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class SqlInterop {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1], sql = args[2], bad = args[3];
        int expected = Integer.parseInt(args[4]);
        DefaultMQProducer producer = new DefaultMQProducer("sql_interop_p");
        producer.setNamesrvAddr(ns);
        producer.start();
        for (int i = 0; i < 20; i++) {
            Message m = new Message(topic, ("m" + i).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("n", String.valueOf(i));
            producer.send(m);
        }
        producer.shutdown();

        final ConcurrentSkipListSet<String> got = new ConcurrentSkipListSet<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("sql_interop_c");
        consumer.setNamesrvAddr(ns);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, MessageSelector.bySql(sql));
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + 40_000;
        while (got.size() < expected && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
        }
        Thread.sleep(3000); // nothing else arrives
        consumer.shutdown();

        String badStart = "started";
        DefaultMQPushConsumer wrong = new DefaultMQPushConsumer("sql_interop_bad");
        wrong.setNamesrvAddr(ns);
        wrong.subscribe(topic, MessageSelector.bySql(bad));
        wrong.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        try {
            wrong.start();
            wrong.shutdown();
        } catch (MQClientException e) {
            badStart = e.getResponseCode() + " " + e.getErrorMessage();
        }
        StringBuilder out = new StringBuilder("{\"received\": [");
        boolean first = true;
        for (String s : got) {
            out.append(first ? "" : ", ").append('"').append(s).append('"');
            first = false;
        }
        out.append("], \"bad_start\": \"").append(badStart.replace("\\", "\\\\").replace("\"", "'")).append("\"}");
        System.out.println(out);
        System.exit(0);
    }
}
