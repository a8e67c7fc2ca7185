// Apache RocketMQ 5.2.0's Java push consumer with clientRebalance=false against a rocketrio
// NameServer and broker, for tests/system/test_interop_pop_assignment.py: a producer sends
// args[3] messages m0..m<n-1> to topic args[1]; a push consumer of group args[2] asks the broker
// for its queues (QUERY_ASSIGNMENT) and, the group being in POP mode there, pops them.
// Prints one JSON line: {"received": [...], "pop_queues": [...], "pull_queues": N}.
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.consumer.RebalanceImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class PopModeInterop {
    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        DefaultMQProducer producer = new DefaultMQProducer("pop_mode_interop_p");
        producer.setNamesrvAddr(ns);
        producer.start();
        for (int i = 0; i < count; i++) {
            producer.send(new Message(topic, ("m" + i).getBytes(StandardCharsets.UTF_8)));
        }
        producer.shutdown();

        final ConcurrentSkipListSet<String> got = new ConcurrentSkipListSet<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(ns);
        consumer.setClientRebalance(false); // ask the broker (QUERY_ASSIGNMENT)
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                got.add(new String(m.getBody(), StandardCharsets.UTF_8));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + 60_000;
        while (got.size() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
        }
        RebalanceImpl rebalance = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl();
        Field popField = RebalanceImpl.class.getDeclaredField("popProcessQueueTable");
        popField.setAccessible(true);
        TreeSet<String> popQueues = new TreeSet<>();
        for (Object key : ((Map<?, ?>) popField.get(rebalance)).keySet()) {
            MessageQueue mq = (MessageQueue) key;
            popQueues.add(mq.getTopic() + "/" + mq.getBrokerName() + "/" + mq.getQueueId());
        }
        int pullQueues = 0;
        for (MessageQueue mq : rebalance.getProcessQueueTable().keySet()) {
            if (mq.getTopic().equals(topic)) {
                pullQueues++;
            }
        }
        consumer.shutdown();
        StringBuilder out = new StringBuilder("{\"received\": [");
        boolean first = true;
        for (String s : got) {
            out.append(first ? "" : ", ").append('"').append(s).append('"');
            first = false;
        }
        out.append("], \"pop_queues\": [");
        first = true;
        for (String s : popQueues) {
            out.append(first ? "" : ", ").append('"').append(s).append('"');
            first = false;
        }
        out.append("], \"pull_queues\": ").append(pullQueues).append("}");
        System.out.println(out);
        System.exit(0);
    }
}
