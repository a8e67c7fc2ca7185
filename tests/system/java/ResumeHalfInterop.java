// Apache RocketMQ 5.2.0's transaction producer, MQAdminExt.resumeCheckHalfMessage and a push
// consumer against a rocketrio NameServer and broker (transactionCheckMax 1), for
// tests/system/test_interop_resume_half.py. args: namesrv, topic. The producer's local state is
// UNKNOW: the broker checks once and gives the half up; the state turns COMMIT, the admin resumes
// the half's check by the offset message id of the copy it was checked with (what a check
// hands the listener as getMsgId()), the broker checks again and commits, the consumer
// gets the message. Prints one JSON line: {"resumed": true, "checks": N, "got": [...]}.
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class ResumeHalfInterop {
    static volatile LocalTransactionState state = LocalTransactionState.UNKNOW;
    static volatile String checkedId;  // the offset message id of the half copy last checked

    public static void main(String[] args) throws Exception {
        String ns = args[0], topic = args[1];
        AtomicInteger checks = new AtomicInteger();
        TransactionMQProducer producer = new TransactionMQProducer("resume_interop_p");
        producer.setNamesrvAddr(ns);
        producer.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.UNKNOW;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checkedId = msg.getMsgId();
                checks.incrementAndGet();
                return state;
            }
        });
        producer.start();
        producer.sendMessageInTransaction(
            new Message(topic, "tx0".getBytes(StandardCharsets.UTF_8)), null);
        long deadline = System.currentTimeMillis() + 60_000;
        while (checks.get() < 1 && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(8_000);  // more rounds: the half is given up after transactionCheckMax (1)
        int before = checks.get();
        System.err.println("PROGRESS checks=" + before + " id=" + checkedId);
        state = LocalTransactionState.COMMIT_MESSAGE;

        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(ns);
        admin.setInstanceName("resume_interop_admin");
        admin.start();
        boolean resumed = admin.resumeCheckHalfMessage(checkedId);
        System.err.println("PROGRESS resumed=" + resumed);

        List<String> got = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("resume_interop_c");
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
        deadline = System.currentTimeMillis() + 60_000;
        while (got.isEmpty() && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
        }
        Thread.sleep(5_000);  // a second delivery would show here
        consumer.shutdown();
        admin.shutdown();
        producer.shutdown();
        System.out.println("{\"resumed\": " + resumed + ", \"checks_before\": " + before
            + ", \"checks\": " + checks.get() + ", \"got\": ["
            + (got.isEmpty() ? "" : "\"" + String.join("\",\"", got) + "\"") + "]}");
        System.exit(0);
    }
}
