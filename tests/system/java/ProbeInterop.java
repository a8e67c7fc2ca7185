// Apache RocketMQ 5.2.0's remoting client and header classes against a rocketrio broker, for
// tests/system/test_interop_pop_probes.py: NOTIFICATION (held, answered at its pollTime, then
// held and answered on an arrival), PEEK_MESSAGE (twice: the same messages), POLLING_INFO while
// a POP_MESSAGE is held, and a PEEK of an unknown topic. Args: namesrv, broker, topic, group.
// Prints one JSON line.
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.header.NotificationRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.NotificationResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.PeekMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.PollingInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.PollingInfoResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.PopMessageResponseHeader;

public class ProbeInterop {
    static NettyRemotingClient client;
    static String broker, topic, group;

    static String notification(int queueId, long pollMs) throws Exception {
        NotificationRequestHeader h = new NotificationRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(queueId);
        h.setPollTime(pollMs);
        h.setBornTime(System.currentTimeMillis());
        RemotingCommand r = client.invokeSync(
            broker, RemotingCommand.createRequestCommand(RequestCode.NOTIFICATION, h), pollMs + 10000);
        if (r.getCode() != 0) {
            return "code " + r.getCode() + " " + r.getRemark();
        }
        NotificationResponseHeader rh =
            (NotificationResponseHeader) r.decodeCommandCustomHeader(NotificationResponseHeader.class);
        return String.valueOf(rh.isHasMsg());
    }

    static String peek(String t, int queueId) throws Exception {
        PeekMessageRequestHeader h = new PeekMessageRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(t);
        h.setQueueId(queueId);
        h.setMaxMsgNums(32);
        RemotingCommand r = client.invokeSync(
            broker, RemotingCommand.createRequestCommand(RequestCode.PEEK_MESSAGE, h), 10000);
        StringBuilder sb = new StringBuilder("{\"code\": " + r.getCode() + ", \"remark\": \""
            + r.getRemark().split(",")[0].replace("\"", "'") + "\"");
        if (r.getCode() == 0) {
            PopMessageResponseHeader rh =
                (PopMessageResponseHeader) r.decodeCommandCustomHeader(PopMessageResponseHeader.class);
            List<String> bodies = new ArrayList<>();
            for (MessageExt m : MessageDecoder.decodes(ByteBuffer.wrap(r.getBody()))) {
                bodies.add("\"" + new String(m.getBody(), StandardCharsets.UTF_8) + "\"");
            }
            sb.append(", \"rest\": " + rh.getRestNum() + ", \"bodies\": " + bodies);
        }
        return sb.append("}").toString();
    }

    static int pollingNum(int queueId) throws Exception {
        PollingInfoRequestHeader h = new PollingInfoRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(queueId);
        RemotingCommand r = client.invokeSync(
            broker, RemotingCommand.createRequestCommand(RequestCode.POLLING_INFO, h), 10000);
        if (r.getCode() != 0) {
            return -1000 - r.getCode();
        }
        return ((PollingInfoResponseHeader) r.decodeCommandCustomHeader(PollingInfoResponseHeader.class))
            .getPollingNum();
    }

    static Thread popHeld(int queueId, AtomicReference<String> out) {
        Thread t = new Thread(() -> {
            try {
                PopMessageRequestHeader h = new PopMessageRequestHeader();
                h.setConsumerGroup(group);
                h.setTopic(topic);
                h.setQueueId(queueId);
                h.setMaxMsgNums(32);
                h.setInvisibleTime(60000);
                h.setPollTime(15000);
                h.setBornTime(System.currentTimeMillis());
                h.setInitMode(0);
                RemotingCommand r = client.invokeSync(
                    broker, RemotingCommand.createRequestCommand(RequestCode.POP_MESSAGE, h), 30000);
                out.set(r.getCode() + " " + r.getRemark());
            } catch (Exception e) {
                out.set("error " + e);
            }
        });
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        String ns = args[0];
        broker = args[1];
        topic = args[2];
        group = args[3];
        client = new NettyRemotingClient(new NettyClientConfig());
        client.start();
        DefaultMQProducer producer = new DefaultMQProducer("probe_interop_p");
        producer.setNamesrvAddr(ns);
        producer.start();
        String brokerName = producer.fetchPublishMessageQueues(topic).get(0).getBrokerName();

        long t0 = System.currentTimeMillis();
        String timedOut = notification(0, 2000);
        long timedOutMs = System.currentTimeMillis() - t0;

        AtomicReference<String> held = new AtomicReference<>();
        Thread waiter = new Thread(() -> {
            try {
                held.set(notification(0, 20000));
            } catch (Exception e) {
                held.set("error " + e);
            }
        });
        waiter.start();
        Thread.sleep(1000);
        long sentAt = System.currentTimeMillis();
        producer.send(new Message(topic, "p0".getBytes(StandardCharsets.UTF_8)),
            new MessageQueue(topic, brokerName, 0));
        producer.send(new Message(topic, "p1".getBytes(StandardCharsets.UTF_8)),
            new MessageQueue(topic, brokerName, 0));
        waiter.join();
        long wokenMs = System.currentTimeMillis() - sentAt;

        String peek1 = peek(topic, 0);
        String peek2 = peek(topic, 0);
        String peekBad = peek("NoSuchTopic", 0);

        AtomicReference<String> popped = new AtomicReference<>();
        Thread pop = popHeld(1, popped);
        Thread.sleep(1500);
        int polling1 = pollingNum(1);
        int polling2 = pollingNum(2);
        producer.send(new Message(topic, "q0".getBytes(StandardCharsets.UTF_8)),
            new MessageQueue(topic, brokerName, 1));
        pop.join();
        int pollingAfter = pollingNum(1);
        producer.shutdown();
        client.shutdown();
        System.out.println("{\"timed_out\": \"" + timedOut + "\", \"timed_out_ms\": " + timedOutMs
            + ", \"held\": \"" + held.get() + "\", \"woken_ms\": " + wokenMs
            + ", \"peek1\": " + peek1 + ", \"peek2\": " + peek2 + ", \"peek_bad\": " + peekBad
            + ", \"polling\": [" + polling1 + ", " + polling2 + ", " + pollingAfter + "]"
            + ", \"popped\": \"" + popped.get() + "\"}");
    }
}
