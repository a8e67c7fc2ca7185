// Apache RocketMQ 5.2.0's own client calls for ordered POP (the ones its proxy makes for a FIFO
// group: MQClientAPIImpl.popMessageAsync with order=true, ackMessageAsync) against a rocketrio
// NameServer and broker, for tests/system/test_interop_order_pop.py. A producer sends args[3]
// messages q<queue>-<i> to each of queues 0 and 1 of topic args[1] (a selector); then, for
// group args[2] on queue 0 only:
//   pop 1: order, at most 3, invisible 3 s -> the first three, in order;
//   pop 2 at once: nothing (the batch in flight holds the queue);
//   the three acked with the POP_CK extra info Java built from the answer's header;
//   pop 3: the next three, not acked;
//   pop 4 after 4 s: the same three again, each with reconsumeTimes 1 as Java reads it from
//   the answer's orderCountInfo.
// Prints one JSON line: {"pops": [[status, [body, reconsumeTimes]...], ...], "acks": [...]}.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.consumer.PopStatus;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.constant.ConsumeInitMode;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;

public class OrderPopInterop {
    static MQClientInstance client;
    static String addr, brokerName, topic, group;

    public static void main(String[] args) throws Exception {
        String ns = args[0];
        topic = args[1];
        group = args[2];
        int count = Integer.parseInt(args[3]);
        DefaultMQProducer producer = new DefaultMQProducer("order_pop_interop_p");
        producer.setNamesrvAddr(ns);
        producer.start();
        for (int q = 0; q < 2; q++) {
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, ("q" + q + "-" + i).getBytes(StandardCharsets.UTF_8));
                producer.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg), q);
            }
        }
        List<MessageQueue> queues = producer.fetchPublishMessageQueues(topic);
        brokerName = queues.get(0).getBrokerName();
        producer.shutdown();

        ClientConfig config = new ClientConfig();
        config.setNamesrvAddr(ns);
        config.setInstanceName("order_pop_interop");
        client = MQClientManager.getInstance().getOrCreateMQClientInstance(config);
        client.start();
        client.updateTopicRouteInfoFromNameServer(topic);
        addr = client.findBrokerAddressInPublish(brokerName);

        StringBuilder out = new StringBuilder("{\"pops\": [");
        List<String> acks = new ArrayList<>();
        PopResult first = pop(3000);
        out.append(describe(first)).append(", ");
        out.append(describe(pop(3000))).append(", ");
        for (MessageExt m : first.getMsgFoundList()) {
            acks.add(ack(m));
        }
        out.append(describe(pop(3000))).append(", ");
        Thread.sleep(4000);
        out.append(describe(pop(3000))).append("], \"acks\": [");
        for (int i = 0; i < acks.size(); i++) {
            out.append(i == 0 ? "" : ", ").append('"').append(acks.get(i)).append('"');
        }
        out.append("]}");
        client.shutdown();
        System.out.println(out);
        System.exit(0);
    }

    static PopResult pop(long invisibleMs) throws Exception {
        PopMessageRequestHeader h = new PopMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(0);
        h.setMaxMsgNums(3);
        h.setInvisibleTime(invisibleMs);
        h.setInitMode(ConsumeInitMode.MIN);
        h.setExpType("TAG");
        h.setExp("*");
        h.setOrder(true);
        h.setBrokerName(brokerName);
        CompletableFuture<PopResult> done = new CompletableFuture<>();
        client.getMQClientAPIImpl().popMessageAsync(brokerName, addr, h, 10_000, new PopCallback() {
            @Override
            public void onSuccess(PopResult r) {
                done.complete(r);
            }

            @Override
            public void onException(Throwable e) {
                done.completeExceptionally(e);
            }
        });
        return done.get(15, TimeUnit.SECONDS);
    }

    static String ack(MessageExt m) throws Exception {
        String extraInfo = m.getProperty(MessageConst.PROPERTY_POP_CK);
        String[] parts = ExtraInfoUtil.split(extraInfo);
        AckMessageRequestHeader h = new AckMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(ExtraInfoUtil.getQueueId(parts));
        h.setOffset(ExtraInfoUtil.getQueueOffset(parts));
        h.setExtraInfo(extraInfo);
        CompletableFuture<AckResult> done = new CompletableFuture<>();
        client.getMQClientAPIImpl().ackMessageAsync(addr, 10_000, new AckCallback() {
            @Override
            public void onSuccess(AckResult r) {
                done.complete(r);
            }

            @Override
            public void onException(Throwable e) {
                done.completeExceptionally(e);
            }
        }, h);
        return done.get(15, TimeUnit.SECONDS).getStatus().toString();
    }

    static String describe(PopResult r) {
        StringBuilder b = new StringBuilder("[\"").append(r.getPopStatus()).append("\", [");
        if (r.getPopStatus() == PopStatus.FOUND) {
            boolean firstMsg = true;
            for (MessageExt m : r.getMsgFoundList()) {
                b.append(firstMsg ? "" : ", ").append("[\"")
                    .append(new String(m.getBody(), StandardCharsets.UTF_8)).append("\", ")
                    .append(m.getReconsumeTimes()).append(']');
                firstMsg = false;
            }
        }
        return b.append("]]").toString();
    }
}
