// Apache RocketMQ 5.2.0's MQAdminExt.updateAndGetGroupReadForbidden and a Java push consumer
// against a rocketrio NameServer and broker, for tests/system/test_interop_group_forbidden.py.
// args: namesrv, broker address, topic, group. The group is forbidden to read the topic; a push
// consumer of the group gets nothing for 12 s; the group is allowed again and the consumer gets
// the message. Prints one JSON line:
// {"forbid": <GroupForbidden JSON>, "read": ..., "allow": ..., "while_forbidden": N, "after": [...]}
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.subscription.GroupForbidden;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class GroupForbiddenInterop {
    public static void main(String[] args) throws Exception {
        String ns = args[0], broker = args[1], topic = args[2], group = args[3];
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("forbidden_interop_admin");
        admin.start();
        GroupForbidden forbid = admin.updateAndGetGroupReadForbidden(broker, group, topic, false);
        GroupForbidden read = admin.updateAndGetGroupReadForbidden(broker, group, topic, null);

        DefaultMQProducer producer = new DefaultMQProducer("forbidden_interop_p");
        producer.setNamesrvAddr(ns);
        producer.start();
        producer.send(new Message(topic, "m0".getBytes(StandardCharsets.UTF_8)));
        producer.shutdown();

        List<String> got = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(ns);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Thread.sleep(12_000);
        int whileForbidden = got.size();
        GroupForbidden allow = admin.updateAndGetGroupReadForbidden(broker, group, topic, true);
        long deadline = System.currentTimeMillis() + 30_000;
        while (got.isEmpty() && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
        }
        consumer.shutdown();
        admin.shutdown();
        System.out.println("{\"forbid\": " + forbid.toJson() + ", \"read\": " + read.toJson()
            + ", \"allow\": " + allow.toJson() + ", \"while_forbidden\": " + whileForbidden
            + ", \"after\": [" + (got.isEmpty() ? "" : "\"" + String.join("\",\"", got) + "\"")
            + "]}");
    }
}
