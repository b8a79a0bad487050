"""The generated conversation set bench/recall.py measures recall on (pure, seeded).

Made by code here, copied from no dataset: for each half ("tuning", "held-out") and each
language (English, Japanese), six people with some two hundred distinct memories each over six
months — a dozen that matter (a pet, a sister, an instrument, a trip …) among everyday
notes that reuse the same words — and one channel per language with months of dated chat
in which each person says a few things worth asking about later. Questions come at the end:
the memory or the message that answers each is far back, beyond the newest ten memories
and the last twenty messages.

The halves share no person, and each uses its own phrasings of facts and questions (the
tuning half the even ones, the held-out half the odd ones), so a ranking tuned on one half
is measured on phrasings it never saw. Some questions share no content word with their
evidence ("any food you can't eat?" for an allergy): plain word matching misses those, and
they stay in, as they would in a real server. Near-duplicate pairs (repeats, extensions,
rephrasings; and distinct facts that look alike) come from the same facts."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict, TypeVar

from app.kit.tokens import is_cjk, token_set

T = TypeVar("T")

DAYS = 180
NOTES_PER_PERSON = 300  # drawn; about two hundred are distinct and kept
MESSAGES_PER_CHANNEL = 2000
VAGUE_SHARE = 0.15  # questions about a memory that do not name what they ask about
HALVES = ("tuning", "held-out")
# Words that do not make a question name its evidence (whether one does is computed).
FUNCTION_WORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "is",
        "are",
        "was",
        "to",
        "in",
        "at",
        "of",
        "for",
        "my",
        "your",
        "you",
        "i",
        "me",
        "and",
        "on",
        "with",
        "it",
        "did",
        "do",
        "does",
        "still",
        "how",
        "what",
        "when",
        "who",
        "where",
        "again",
        "any",
        "s",
        "t",
        "there",
        "now",
        "yet",
        "be",
        "this",
        "that",
        "about",
        "up",
        "going",
        "so",
        "not",
        "has",
        "have",
        "had",
        "can",
    ]
)


@dataclass(frozen=True)
class Note:
    person: int
    text: str
    days_ago: float
    key: str | None = None  # the fact family, for the evidence notes


@dataclass(frozen=True)
class Said:
    id: int
    channel: int
    author: int
    name: str
    text: str
    days_ago: float
    is_bot: bool = False


@dataclass(frozen=True)
class Question:
    language: str
    asker: int
    name: str
    channel: int
    text: str
    memory: int | None = None  # index into ConversationSet.notes
    message: int | None = None  # id of a Said
    lexical: bool = True  # shares a content word with its evidence
    across: bool = False  # asked in the other language than its evidence


@dataclass(frozen=True)
class Pair:
    """Two notes of one person: should the second merge into the first?"""

    language: str
    person: int
    old: str
    new: str
    duplicate: bool
    why: str


@dataclass
class ConversationSet:
    half: str
    notes: list[Note] = field(default_factory=list)
    messages: list[Said] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    languages: dict[int, str] = field(default_factory=dict)  # person → language
    channels: dict[str, int] = field(default_factory=dict)  # language → channel id


# --- the vocabularies --------------------------------------------------------------------

EN = {
    "animal": ["cat", "dog", "rabbit", "parrot", "hamster", "turtle", "ferret", "tortoise"],
    "pet": [
        "Miso",
        "Mochi",
        "Biscuit",
        "Pepper",
        "Noodle",
        "Maple",
        "Ziggy",
        "Clover",
        "Tofu",
        "Juniper",
        "Pickle",
        "Waffle",
        "Sesame",
        "Olive",
        "Pistachio",
        "Nimbus",
    ],
    "city": [
        "Lisbon",
        "Osaka",
        "Denver",
        "Tallinn",
        "Porto",
        "Krakow",
        "Bergen",
        "Seville",
        "Halifax",
        "Tbilisi",
        "Quito",
        "Perth",
        "Ghent",
        "Nagoya",
        "Split",
        "Leipzig",
    ],
    "sib": [
        "Hana",
        "Marco",
        "Ines",
        "Tomas",
        "Leila",
        "Oskar",
        "Priya",
        "Jonas",
        "Nadia",
        "Felix",
        "Rosa",
        "Emil",
    ],
    "instrument": [
        "cello",
        "violin",
        "ukulele",
        "piano",
        "trumpet",
        "banjo",
        "harp",
        "saxophone",
        "drums",
        "flute",
        "accordion",
    ],
    "job": [
        "nurse",
        "architect",
        "barista",
        "translator",
        "electrician",
        "librarian",
        "pharmacist",
        "animator",
        "carpenter",
        "surveyor",
    ],
    "company": [
        "Northwind",
        "Bluefin Labs",
        "Cedar Health",
        "Orbit Foods",
        "Kestrel Games",
        "Lumen Print",
        "Harbor Bank",
        "Tidewater",
    ],
    "place": [
        "Iceland",
        "Morocco",
        "Patagonia",
        "Vietnam",
        "the Dolomites",
        "Sicily",
        "Hokkaido",
        "Scotland",
        "Peru",
        "Jordan",
        "Norway",
        "Crete",
    ],
    "month": [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ],
    "food": [
        "ramen",
        "paella",
        "pho",
        "lasagna",
        "tacos",
        "curry",
        "dumplings",
        "risotto",
        "shakshuka",
        "bibimbap",
        "falafel",
        "gnocchi",
    ],
    "allergen": ["peanuts", "shellfish", "gluten", "sesame", "kiwi", "soy", "almonds", "eggs"],
    "sport": [
        "climbing",
        "swimming",
        "cycling",
        "rowing",
        "fencing",
        "yoga",
        "bouldering",
        "badminton",
        "running",
        "kayaking",
    ],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "book": [
        "Dune",
        "Middlemarch",
        "The Hobbit",
        "Beloved",
        "Solaris",
        "Piranesi",
        "Rebecca",
        "Ulysses",
        "Emma",
        "Kindred",
    ],
    "event": [
        "marathon",
        "triathlon",
        "chess tournament",
        "baking contest",
        "hackathon",
        "choir concert",
        "cycling race",
        "quiz night",
    ],
    "plant": ["tomatoes", "basil", "chillies", "orchids", "mint", "sunflowers", "lavender"],
    "friend": ["Theo", "Maya", "Jin", "Lucia", "Omar", "Freya", "Kai", "Zoe", "Ravi", "Ingrid"],
    "topic": [
        "pirates",
        "volcanoes",
        "jazz",
        "chess",
        "robots",
        "gardening",
        "astronomy",
        "history",
        "trains",
        "dinosaurs",
        "coffee",
        "knitting",
        "photography",
        "surfing",
        "board games",
        "podcasts",
        "bees",
        "glaciers",
        "typography",
    ],
    "object": [
        "umbrella",
        "backpack",
        "laptop",
        "bicycle",
        "camera",
        "kettle",
        "headphones",
        "jacket",
        "lamp",
        "wallet",
        "keys",
        "scarf",
    ],
    "room": ["kitchen", "attic", "garage", "balcony", "bedroom", "hallway"],
    "location": ["station", "library", "gym", "market", "park", "harbour", "museum"],
    "street": ["Elm Street", "Dock Road", "Hill Lane", "Mill Street", "Rose Avenue"],
    "weather": ["sunny", "freezing", "foggy", "windy", "humid", "stormy"],
}
JA = {
    "animal": ["猫", "犬", "うさぎ", "インコ", "ハムスター", "亀"],
    "pet": [
        "ミソ",
        "モチ",
        "きなこ",
        "ポン太",
        "チャチャ",
        "ココア",
        "ソラ",
        "コタロウ",
        "ムギ",
        "あずき",
        "ゴマ",
        "ジロー",
    ],
    "city": [
        "札幌",
        "福岡",
        "金沢",
        "仙台",
        "那覇",
        "神戸",
        "長崎",
        "松本",
        "函館",
        "熊本",
        "高松",
        "盛岡",
    ],
    "sib": ["真理子", "美咲", "由美", "恵", "千尋", "彩", "直美", "香織"],
    "instrument": [
        "チェロ",
        "バイオリン",
        "ピアノ",
        "三味線",
        "尺八",
        "ウクレレ",
        "フルート",
        "琴",
    ],
    "job": ["看護師", "建築士", "翻訳者", "薬剤師", "司書", "大工", "保育士", "編集者"],
    "company": ["青葉商事", "北斗電機", "桜井製薬", "海風食品", "星野印刷", "白樺銀行"],
    "place": [
        "北海道",
        "沖縄",
        "台湾",
        "京都",
        "屋久島",
        "ベトナム",
        "アイスランド",
        "箱根",
        "石垣島",
        "ソウル",
    ],
    "month": [f"{n}月" for n in range(1, 13)],
    "food": [
        "ラーメン",
        "お好み焼き",
        "寿司",
        "カレー",
        "餃子",
        "天ぷら",
        "うどん",
        "焼き鳥",
        "もんじゃ焼き",
        "たこ焼き",
    ],
    "allergen": ["そば", "えび", "卵", "小麦", "落花生", "キウイ", "かに"],
    "sport": ["水泳", "ボルダリング", "ヨガ", "剣道", "弓道", "テニス", "卓球", "ランニング"],
    "weekday": ["月曜日", "火曜日", "水曜日", "木曜日", "金曜日", "土曜日", "日曜日"],
    "book": [
        "吾輩は猫である",
        "雪国",
        "羅生門",
        "坊っちゃん",
        "銀河鉄道の夜",
        "人間失格",
        "こころ",
        "砂の女",
    ],
    "event": ["マラソン大会", "将棋大会", "合唱コンクール", "書道展", "料理コンテスト", "駅伝"],
    "plant": ["トマト", "バジル", "唐辛子", "蘭", "ミント", "ひまわり"],
    "friend": ["健太", "直子", "翔", "麻衣", "拓也", "優子", "大輔", "愛"],
    "topic": [
        "火山",
        "ジャズ",
        "将棋",
        "ロボット",
        "園芸",
        "天文学",
        "歴史",
        "電車",
        "恐竜",
        "写真",
        "登山",
        "映画",
        "落語",
        "盆栽",
        "昆虫",
        "宇宙",
    ],
    "object": [
        "傘",
        "リュック",
        "ノートパソコン",
        "自転車",
        "カメラ",
        "やかん",
        "イヤホン",
        "上着",
        "財布",
        "鍵",
    ],
    "room": ["台所", "押し入れ", "ベランダ", "寝室", "玄関"],
    "location": ["駅", "図書館", "ジム", "市場", "公園", "港", "美術館"],
    "street": ["桜通り", "港町", "本町", "栄町"],
    "weather": ["晴れ", "大雪", "霧", "強風", "蒸し暑い", "台風"],
}


class Family(TypedDict):
    """A fact family: its fact phrasings, the detail an extension adds, a negation of it,
    and its questions — those with a slot name the thing asked about, those without ("how's
    the job?") do not. Phrasings and questions split by index between the halves."""

    fact: list[str]
    more: list[str]
    neg: str
    ask: list[str]


FAMILIES_EN: dict[str, Family] = {
    "pet": {
        "fact": [
            "{name} has a {animal} named {pet}.",
            "{name}'s {animal} is called {pet}.",
            "{name} adopted a {animal} called {pet}.",
            "{name} lives with a {animal} named {pet}.",
        ],
        "more": [", who sleeps on the windowsill", ", a shy one"],
        "neg": "{name} does not have a {animal} named {pet} anymore.",
        "ask": [
            "how is {pet} doing?",
            "is {pet} still sleeping all day?",
            "how old is {pet} now?",
            "does your {animal} still hate the vet?",
            "how's your little furry friend?",
        ],
    },
    "sister": {
        "fact": [
            "{name}'s sister {sib} lives in {city}.",
            "{name} has a sister, {sib}, in {city}.",
            "{name}'s older sister {sib} moved to {city}.",
            "{sib}, {name}'s sister, is based in {city}.",
        ],
        "more": [" and works at a bakery", " with her two kids"],
        "neg": "{name}'s sister {sib} no longer lives in {city}.",
        "ask": [
            "any news from {sib}?",
            "is your sister still in {city}?",
            "did {sib} come to visit?",
            "how is life in {city} for your sister?",
            "how's the family doing?",
        ],
    },
    "instrument": {
        "fact": [
            "{name} is learning to play the {instrument}.",
            "{name} takes {instrument} lessons.",
            "{name} started {instrument} lessons this year.",
            "{name} practises the {instrument} every evening.",
        ],
        "more": [" with a teacher from the conservatory", " and wants to join an orchestra"],
        "neg": "{name} is not learning the {instrument} anymore.",
        "ask": [
            "how are the {instrument} lessons going?",
            "still practising the {instrument}?",
            "can you play a song on the {instrument} yet?",
            "is the {instrument} teacher nice?",
            "how's the music going?",
        ],
    },
    "job": {
        "fact": [
            "{name} works as a {job} at {company}.",
            "{name} is a {job} at {company}.",
            "{name} got a job as a {job} with {company}.",
            "{name} has been a {job} at {company} for years.",
        ],
        "more": [" on the night shift", " and leads a small team"],
        "neg": "{name} does not work at {company} anymore.",
        "ask": [
            "how is work at {company}?",
            "busy week at {company}?",
            "do you still like being a {job}?",
            "is {company} treating you well?",
            "how's the job?",
        ],
    },
    "trip": {
        "fact": [
            "{name} is planning a trip to {place} in {month}.",
            "{name} will travel to {place} in {month}.",
            "{name} booked a holiday in {place} for {month}.",
            "{name} wants to visit {place} this {month}.",
        ],
        "more": [" with two friends", " for ten days"],
        "neg": "{name} is not going to {place} in {month} after all.",
        "ask": [
            "when are you going to {place}?",
            "is the {place} trip still on?",
            "what will you do in {place}?",
            "excited about {place}?",
            "when is your holiday?",
        ],
    },
    "food": {
        "fact": [
            "{name}'s favourite food is {food}.",
            "{name} loves {food} more than anything.",
            "{name} could eat {food} every day.",
            "Nothing beats {food} for {name}.",
        ],
        "more": [", especially homemade", " from the place near the station"],
        "neg": "{name} does not like {food}.",
        "ask": [
            "want to get {food} later?",
            "should I make {food} tonight?",
            "know a good {food} place?",
            "is {food} still your favourite?",
            "what should we have for dinner?",
        ],
    },
    "allergy": {
        "fact": [
            "{name} is allergic to {allergen}.",
            "{name} has a {allergen} allergy.",
            "{name} must avoid {allergen} because of an allergy.",
            "{allergen} makes {name} sick.",
        ],
        "more": [" and carries an epipen", ", a severe one"],
        "neg": "{name} is not allergic to {allergen}.",
        "ask": [
            "can you eat {allergen}?",
            "is it okay if the cake has {allergen}?",
            "any food you can't eat?",
            "anything I should leave out of the recipe?",
            "are you okay with {allergen} in the sauce?",
        ],
    },
    "sport": {
        "fact": [
            "{name} goes {sport} every {weekday}.",
            "{name} does {sport} on {weekday}s.",
            "{name} never misses {sport} on {weekday}.",
            "{weekday} is {sport} day for {name}.",
        ],
        "more": [" with a club downtown", " before work"],
        "neg": "{name} does not go {sport} on {weekday} anymore.",
        "ask": [
            "going {sport} this {weekday}?",
            "how was {sport} last week?",
            "can I join you for {sport}?",
            "is {weekday} still your {sport} day?",
            "staying active lately?",
        ],
    },
    "book": {
        "fact": [
            "{name} is reading {book}.",
            "{name} started reading {book}.",
            "{name} is halfway through {book}.",
            "{name} borrowed {book} from the library.",
        ],
        "more": [" for a book club", " slowly, a chapter a night"],
        "neg": "{name} did not like {book}.",
        "ask": [
            "finished {book} yet?",
            "how do you like {book}?",
            "is {book} worth reading?",
            "what happens in {book}?",
            "reading anything good?",
        ],
    },
    "goal": {
        "fact": [
            "{name} is training for a {event} in {city}.",
            "{name} signed up for the {event} in {city}.",
            "{name} is preparing for the {event} in {city}.",
            "{name} will compete in a {event} in {city}.",
        ],
        "more": [" next spring", " with a coach"],
        "neg": "{name} is not doing the {event} in {city}.",
        "ask": [
            "how is the {event} training going?",
            "when is the {event}?",
            "ready for {city}?",
            "nervous about the {event}?",
            "how's the big goal coming along?",
        ],
    },
    "plant": {
        "fact": [
            "{name} grows {plant} on the balcony.",
            "{name} has {plant} growing at home.",
            "{name} planted {plant} in spring.",
            "{name} looks after a pot of {plant}.",
        ],
        "more": [" and waters them every morning", " from seeds"],
        "neg": "{name} does not grow {plant}.",
        "ask": [
            "how are the {plant} doing?",
            "did the {plant} survive the heat?",
            "any {plant} to harvest yet?",
            "still growing {plant}?",
            "how's the balcony garden?",
        ],
    },
    "friend": {
        "fact": [
            "{name}'s best friend is {friend}.",
            "{name} has known {friend} since school.",
            "{friend} is {name}'s closest friend.",
            "{name} and {friend} are best friends.",
        ],
        "more": [", who lives next door", " from the old neighbourhood"],
        "neg": "{name} and {friend} are not friends anymore.",
        "ask": [
            "how is {friend}?",
            "seen {friend} lately?",
            "are you and {friend} still close?",
            "is {friend} coming too?",
            "how are your friends?",
        ],
    },
}
FAMILIES_JA: dict[str, Family] = {
    "pet": {
        "fact": [
            "{name}は{animal}の{pet}を飼っている",
            "{name}の{animal}の名前は{pet}",
            "{name}は{pet}という{animal}と暮らしている",
            "{name}の家には{pet}という{animal}がいる",
        ],
        "more": ["、窓辺で寝るのが好き", "、とても人見知り"],
        "neg": "{name}はもう{animal}の{pet}を飼っていない",
        "ask": [
            "{pet}は元気？",
            "{pet}って何歳になった？",
            "最近{pet}どうしてる？",
            "{pet}はまだ病院が嫌い？",
            "おうちの子は元気？",
        ],
    },
    "sister": {
        "fact": [
            "{name}の姉の{sib}は{city}に住んでいる",
            "{name}には{city}に住む姉の{sib}がいる",
            "{name}の姉{sib}は{city}に引っ越した",
            "{name}の姉の{sib}は{city}で暮らしている",
        ],
        "more": ["、パン屋で働いている", "、子どもが二人いる"],
        "neg": "{name}の姉の{sib}はもう{city}に住んでいない",
        "ask": [
            "{city}のお姉さんは元気？",
            "{sib}さんから連絡あった？",
            "お姉さんはまだ{city}？",
            "{sib}さん遊びに来た？",
            "家族は元気？",
        ],
    },
    "instrument": {
        "fact": [
            "{name}は{instrument}を習っている",
            "{name}は毎週{instrument}のレッスンに通っている",
            "{name}は今年から{instrument}を始めた",
            "{name}は毎晩{instrument}を練習している",
        ],
        "more": ["、先生は音大出身", "、いつか合奏に参加したい"],
        "neg": "{name}はもう{instrument}を習っていない",
        "ask": [
            "{instrument}の練習はどう？",
            "{instrument}で何か弾けるようになった？",
            "まだ{instrument}続けてる？",
            "{instrument}の先生は優しい？",
            "音楽のほうはどう？",
        ],
    },
    "job": {
        "fact": [
            "{name}は{company}で{job}として働いている",
            "{name}は{company}の{job}",
            "{name}は{company}に{job}として就職した",
            "{name}は長年{company}で{job}をしている",
        ],
        "more": ["、夜勤が多い", "、小さなチームをまとめている"],
        "neg": "{name}はもう{company}で働いていない",
        "ask": [
            "{company}の仕事は忙しい？",
            "{job}の仕事は楽しい？",
            "最近{company}はどう？",
            "まだ{job}やってる？",
            "仕事はどう？",
        ],
    },
    "trip": {
        "fact": [
            "{name}は{month}に{place}へ旅行する予定",
            "{name}は{month}に{place}に行く",
            "{name}は{month}の{place}旅行を予約した",
            "{name}は{month}に{place}を訪れたいと思っている",
        ],
        "more": ["、友達二人と", "、十日間"],
        "neg": "{name}は結局{month}に{place}へは行かない",
        "ask": [
            "{place}旅行はいつだっけ？",
            "{place}で何するの？",
            "{place}楽しみ？",
            "{place}の旅行まだ行くの？",
            "休みはいつ取るの？",
        ],
    },
    "food": {
        "fact": [
            "{name}の好物は{food}",
            "{name}は{food}が大好き",
            "{name}は毎日でも{food}を食べられる",
            "{name}にとって{food}が一番のごちそう",
        ],
        "more": ["、特に手作りの", "、駅前の店のが好き"],
        "neg": "{name}は{food}が好きではない",
        "ask": [
            "今度{food}食べに行かない？",
            "今夜{food}作ろうか？",
            "おいしい{food}の店知ってる？",
            "まだ{food}が一番好き？",
            "夕飯何にする？",
        ],
    },
    "allergy": {
        "fact": [
            "{name}は{allergen}アレルギーがある",
            "{name}は{allergen}を食べるとアレルギーが出る",
            "{name}はアレルギーのため{allergen}を避けている",
            "{name}は{allergen}が体質的にだめ",
        ],
        "more": ["、かなり重い", "、薬を持ち歩いている"],
        "neg": "{name}は{allergen}アレルギーではない",
        "ask": [
            "{allergen}は食べられる？",
            "ケーキに{allergen}入ってても大丈夫？",
            "食べられないものある？",
            "レシピから抜いたほうがいいものある？",
            "ソースに{allergen}使っても平気？",
        ],
    },
    "sport": {
        "fact": [
            "{name}は毎週{weekday}に{sport}をしている",
            "{name}は{weekday}に{sport}に通っている",
            "{name}は{weekday}の{sport}を欠かさない",
            "{name}にとって{weekday}は{sport}の日",
        ],
        "more": ["、街のクラブで", "、仕事の前に"],
        "neg": "{name}はもう{weekday}に{sport}をしていない",
        "ask": [
            "今週の{weekday}も{sport}？",
            "先週の{sport}どうだった？",
            "{sport}一緒に行ってもいい？",
            "まだ{weekday}は{sport}の日？",
            "最近体動かしてる？",
        ],
    },
    "book": {
        "fact": [
            "{name}は今『{book}』を読んでいる",
            "{name}は『{book}』を読み始めた",
            "{name}は『{book}』を半分まで読んだ",
            "{name}は図書館で『{book}』を借りた",
        ],
        "more": ["、読書会のために", "、毎晩一章ずつ"],
        "neg": "{name}は『{book}』が好きではなかった",
        "ask": [
            "『{book}』はもう読み終わった？",
            "『{book}』面白い？",
            "『{book}』って読む価値ある？",
            "『{book}』はどんな話？",
            "最近何か面白い本読んでる？",
        ],
    },
    "goal": {
        "fact": [
            "{name}は{city}の{event}に向けて練習している",
            "{name}は{city}の{event}に申し込んだ",
            "{name}は{city}で開かれる{event}の準備中",
            "{name}は{city}の{event}に出場する",
        ],
        "more": ["、来年の春に", "、コーチについて"],
        "neg": "{name}は{city}の{event}には出ない",
        "ask": [
            "{event}の準備は順調？",
            "{event}っていつ？",
            "{city}の本番は緊張する？",
            "{event}の練習どう？",
            "大きな目標のほうはどう？",
        ],
    },
    "plant": {
        "fact": [
            "{name}はベランダで{plant}を育てている",
            "{name}の家では{plant}が育っている",
            "{name}は春に{plant}を植えた",
            "{name}は鉢植えの{plant}の世話をしている",
        ],
        "more": ["、毎朝水をやっている", "、種から"],
        "neg": "{name}は{plant}を育てていない",
        "ask": [
            "{plant}の調子はどう？",
            "{plant}は暑さに耐えた？",
            "{plant}もう収穫できる？",
            "まだ{plant}育ててる？",
            "ベランダの菜園はどう？",
        ],
    },
    "friend": {
        "fact": [
            "{name}の親友は{friend}",
            "{name}は学生時代から{friend}と仲がいい",
            "{friend}は{name}の一番の友達",
            "{name}と{friend}は親友",
        ],
        "more": ["、隣に住んでいる", "、昔の近所の"],
        "neg": "{name}と{friend}はもう仲良くない",
        "ask": [
            "{friend}は元気？",
            "最近{friend}に会った？",
            "{friend}とはまだ仲いい？",
            "{friend}も来るの？",
            "友達は元気？",
        ],
    },
}

FILLERS_EN = [
    "{name} watched a documentary about {topic}.",
    "{name} bought a new {object} last {weekday}.",
    "{name} thinks {topic} is fascinating.",
    "{name} had {food} for dinner with {friend}.",
    "{name} wants to learn more about {topic}.",
    "{name} listened to a podcast about {topic}.",
    "{name} spent the weekend cleaning the {room}.",
    "{name} would like to see {city} someday.",
    "{name} finds {weekday}s exhausting.",
    "{name} tried a {food} recipe from a blog.",
    "{name} lent their {object} to a neighbour.",
    "{name} prefers tea over coffee in the morning.",
    "{name} repainted the {room} in {month}.",
    "{name} saw a {animal} at the {location}.",
    "{name} is curious about {topic} and {topic2}.",
    "{name} left the {object} at the {location}.",
]
FILLERS_JA = [
    "{name}は{topic}のドキュメンタリーを見た",
    "{name}は{weekday}に新しい{object}を買った",
    "{name}は{topic}に興味がある",
    "{name}は{friend}と{food}を食べた",
    "{name}はもっと{topic}について知りたい",
    "{name}は{topic}のポッドキャストを聞いた",
    "{name}は週末に{room}を掃除した",
    "{name}はいつか{city}に行ってみたい",
    "{name}は{weekday}が苦手",
    "{name}は{food}のレシピを試した",
    "{name}は{object}を近所の人に貸した",
    "{name}は朝はコーヒーより紅茶派",
    "{name}は{month}に{room}の壁を塗り直した",
    "{name}は{location}で{animal}を見かけた",
    "{name}は{topic}と{topic2}が気になっている",
    "{name}は{location}に{object}を忘れた",
]

# Things said in chat and asked about later: (said, [question, ...]).
SAID_EN = [
    (
        "my flight to {place} is on the {day}th, so excited",
        ["what day was my flight to {place} again?", "when do I fly to {place}?"],
    ),
    (
        "the dentist moved my appointment to {weekday} at {hour}",
        ["when is my dentist appointment again?", "what time was the dentist?"],
    ),
    (
        "{friend} recommended {book} to me, starting it tonight",
        ["who recommended {book} to me?", "who told me to read {book}?"],
    ),
    (
        "I lost my {object} somewhere near the {location}",
        [
            "where did I lose my {object}?",
            "did I say where my {object} went missing?",
        ],
    ),
    (
        "signed up for the {event} in {city}, it's on {month} {day}",
        ["when is the {event} in {city}?", "what date is the {event}?"],
    ),
    (
        "the landlord is raising the rent by {day} percent in {month}",
        ["how much is the rent going up?", "when does the new rent start?"],
    ),
    (
        "the wifi password at the cafe on {street} is {code}",
        [
            "what was the wifi password at the {street} cafe?",
            "what's the cafe wifi password?",
        ],
    ),
    (
        "my bike lock code is {code}, don't tell anyone",
        ["what was my bike lock code?", "remind me of the lock code"],
    ),
]
SAID_JA = [
    (
        "{place}行きの飛行機は{day}日だよ、楽しみ",
        ["{place}行きの飛行機って何日だっけ？", "{place}にはいつ飛ぶんだっけ？"],
    ),
    (
        "歯医者の予約が{weekday}の{hour}に変わった",
        ["歯医者の予約いつだっけ？", "歯医者って何時だった？"],
    ),
    (
        "{friend}に『{book}』を勧められた、今夜から読む",
        [
            "『{book}』を勧めてくれたの誰だっけ？",
            "誰に『{book}』を勧められたんだっけ？",
        ],
    ),
    (
        "{location}の近くで{object}をなくした",
        [
            "{object}どこでなくしたんだっけ？",
            "{object}をなくした場所って言ったっけ？",
        ],
    ),
    (
        "{city}の{event}に申し込んだ、{month}{day}日だって",
        ["{city}の{event}っていつ？", "{event}は何日だっけ？"],
    ),
    (
        "家賃が{month}から{day}パーセント上がるって",
        ["家賃いくら上がるんだっけ？", "新しい家賃はいつから？"],
    ),
    (
        "{street}のカフェのWi-Fiのパスワードは{code}",
        [
            "{street}のカフェのWi-Fiのパスワードなんだっけ？",
            "カフェのパスワード教えて",
        ],
    ),
    (
        "自転車の鍵の番号は{code}、内緒ね",
        ["自転車の鍵の番号なんだっけ？", "鍵の番号教えて"],
    ),
]
CHATTER_EN = [
    "good morning everyone",
    "anyone tried the new {food} place?",
    "it's raining again in {city}",
    "lol",
    "same",
    "I need more coffee",
    "watching a {topic} documentary tonight",
    "my {object} is acting up again",
    "happy {weekday}!",
    "{food} for lunch again",
    "has anyone read {book}?",
    "going {sport} later",
    "who's up for {sport} on {weekday}?",
    "the weather is {weather} today",
    "haha yes",
    "that's wild",
    "brb",
    "so tired today",
    "saw a {animal} at the {location} this morning",
    "{topic} is underrated honestly",
]
CHATTER_JA = [
    "おはよう",
    "{food}の新しい店行った人いる？",
    "{city}はまた雨らしい",
    "草",
    "それな",
    "コーヒーが足りない",
    "今夜は{topic}の番組見る",
    "{object}の調子がまた悪い",
    "{weekday}だね",
    "昼はまた{food}",
    "『{book}』読んだことある？",
    "あとで{sport}行く",
    "{weekday}に{sport}行く人いる？",
    "今日は{weather}",
    "わかる",
    "やばい",
    "ちょっと離席",
    "今日は眠い",
    "今朝{location}で{animal}を見た",
    "{topic}って意外と面白い",
]
# A second question that names nothing, per family, so each half has one of its own.
VAGUE_EN = {
    "pet": "how's the little one at home?",
    "sister": "heard from your family lately?",
    "instrument": "been playing anything lately?",
    "job": "long day at the office?",
    "trip": "any travel plans coming up?",
    "food": "what are you in the mood to eat?",
    "sport": "been exercising much?",
    "book": "what are you reading these days?",
    "goal": "how's the training?",
    "plant": "how's the gardening going?",
    "friend": "catching up with anyone this weekend?",
}
VAGUE_JA = {
    "pet": "家の子は元気にしてる？",
    "sister": "最近家族から連絡あった？",
    "instrument": "最近何か弾いてる？",
    "job": "今日も残業？",
    "trip": "旅行の予定ある？",
    "food": "何食べたい気分？",
    "sport": "最近運動してる？",
    "book": "最近何読んでる？",
    "goal": "練習は順調？",
    "plant": "ガーデニングはどう？",
    "friend": "週末は誰かと会う？",
}
BOT_EN = ["Sounds fun!", "Good luck with that!", "Oh nice, tell me more!", "Haha, I love that."]
BOT_JA = ["いいですね！", "がんばってください！", "それは楽しそう！", "なるほど、面白いですね。"]

PEOPLE = {
    ("tuning", "en"): ["Alice", "Bruno", "Chloe", "Dmitri", "Esme", "Fergus"],
    ("held-out", "en"): ["Greta", "Hamid", "Isla", "Jonah", "Kirsten", "Luca"],
    ("tuning", "ja"): ["さくら", "ゆうと", "はるか", "けんじ", "みお", "そうた"],
    ("held-out", "ja"): ["みさき", "りょう", "あおい", "だいち", "ひなた", "れん"],
}


# --- the generator -----------------------------------------------------------------------


class _Maker:
    def __init__(self, half: str, language: str, rng: random.Random, start_id: int) -> None:
        self.half, self.language, self.rng = half, language, rng
        self.vocab = EN if language == "en" else JA
        self.families = FAMILIES_EN if language == "en" else FAMILIES_JA
        self.parity = 0 if half == "tuning" else 1
        self.next_id = start_id

    def own(self, items: Sequence[T]) -> list[T]:
        """This half's share: the even-indexed phrasings, or the odd ones."""
        return [x for i, x in enumerate(items) if i % 2 == self.parity]

    def ask(self, key: str, asks: Sequence[str]) -> str:
        """A question about one fact: one that names it, or now and then (VAGUE_SHARE) one
        that does not; from this half's phrasings only."""
        extra = (VAGUE_EN if self.language == "en" else VAGUE_JA).get(key)
        vague = [a for a in asks if "{" not in a] + ([extra] if extra else [])
        named = [a for a in asks if "{" in a]
        pool = vague if self.rng.random() < VAGUE_SHARE else named
        return self.rng.choice(self.own(pool))

    def slots(self, name: str) -> dict[str, str]:
        found = {k: self.rng.choice(v) for k, v in self.vocab.items()}
        found["topic2"] = self.rng.choice(self.vocab["topic"])
        found["day"] = str(self.rng.randint(2, 28))
        found["hour"] = f"{self.rng.randint(9, 17)}:{self.rng.choice(['00', '30'])}"
        found["code"] = (
            f"{self.rng.choice(['blue', 'otter', 'lemon', 'ferry'])}{self.rng.randint(100, 999)}"
        )
        found["name"] = name
        return found


def shares_word(question: str, evidence: str, name: str) -> bool:
    """Whether the question names its evidence: a word of both that is not the person's
    name or a function word (in Japanese: a kanji, or a pair with no hiragana)."""
    words = token_set(question) - token_set(name) - FUNCTION_WORDS
    return bool({w for w in words if _content(w)} & token_set(evidence))


def _content(token: str) -> bool:
    if not any(is_cjk(c) for c in token):
        return True
    return not any(0x3041 <= ord(c) <= 0x309F for c in token)


def _fill(template: str, slots: dict[str, str]) -> str:
    text = template.format(**slots)
    return text[0].upper() + text[1:] if text[:1].isascii() else text


def generate(half: str, *, seed: int) -> ConversationSet:
    """One half of the set, the same for the same ``half`` and ``seed``."""
    rng = random.Random(f"{half}:{seed}")
    made = ConversationSet(half)
    for n, language in enumerate(("en", "ja")):
        maker = _Maker(
            half, language, rng, start_id=10**15 * (1 + n) + (0 if half == "tuning" else 10**14)
        )
        channel = 7000 + n + (0 if half == "tuning" else 10)
        made.channels[language] = channel
        people = []
        for i, name in enumerate(PEOPLE[(half, language)]):
            person = 100_000 + 1000 * n + i + (0 if half == "tuning" else 500)
            made.names[person], made.languages[person] = name, language
            people.append(person)
            _person_notes(made, maker, person, name, channel)
        _channel(made, maker, channel, people)
    _across(made, random.Random(f"{half}:{seed}:across"))
    return made


ACROSS_PER_PERSON = 4


def _across(made: ConversationSet, rng: random.Random) -> None:
    """A bilingual server: each person asks, in the other language, about a few of their
    facts (this half's phrasings of the other language's questions that name nothing, so no
    word is shared). Drawn from their own generator, so the rest of the set is unchanged."""
    parity = 0 if made.half == "tuning" else 1
    for index, note in list(enumerate(made.notes)):
        if note.key is None or rng.random() >= ACROSS_PER_PERSON / len(FAMILIES_EN):
            continue
        language = "ja" if made.languages[note.person] == "en" else "en"
        families = FAMILIES_JA if language == "ja" else FAMILIES_EN
        vague = VAGUE_JA if language == "ja" else VAGUE_EN
        asks = [a for a in families[note.key]["ask"] if "{" not in a]
        asks += [vague[note.key]] if note.key in vague else []
        own = [a for i, a in enumerate(asks) if i % 2 == parity] or asks
        ask = rng.choice(own)
        channel = made.channels[made.languages[note.person]]
        name = made.names[note.person]
        made.questions.append(
            Question(language, note.person, name, channel, ask, index, None, False, True)
        )


def _person_notes(
    made: ConversationSet, maker: _Maker, person: int, name: str, channel: int
) -> None:
    for key, family in maker.families.items():
        slots = maker.slots(name)
        fact = _fill(maker.rng.choice(maker.own(family["fact"])), slots)
        index = len(made.notes)
        made.notes.append(Note(person, fact, maker.rng.uniform(25, DAYS), key))
        ask = _fill(maker.ask(key, family["ask"]), slots)
        lexical = shares_word(ask, fact, name)
        made.questions.append(
            Question(maker.language, person, name, channel, ask, index, None, lexical)
        )
        _pairs(made, maker, person, family, slots, fact)
    fillers = FILLERS_EN if maker.language == "en" else FILLERS_JA
    kept = {note.text for note in made.notes if note.person == person}
    for _ in range(NOTES_PER_PERSON - len(maker.families)):
        text = _fill(maker.rng.choice(fillers), maker.slots(name))
        days_ago = maker.rng.uniform(0, DAYS)
        # The store never holds one text twice for a person (the write path's duplicate
        # rule refreshes the old row): a note drawn again is dropped, not kept as a copy
        # that would fill the top ten with one look-alike. (Nothing is redrawn, so the
        # rest of the set is the same as before.)
        if text not in kept:
            kept.add(text)
            made.notes.append(Note(person, text, days_ago))


def _pairs(
    made: ConversationSet,
    maker: _Maker,
    person: int,
    family: Family,
    slots: dict[str, str],
    fact: str,
) -> None:
    """Near-duplicate pairs from one fact: what should merge, and what must not."""
    lang, stop = maker.language, "." if maker.language == "en" else ""
    bare = fact.rstrip(".")
    other = dict(slots)
    for key in (
        "pet",
        "sib",
        "instrument",
        "company",
        "place",
        "food",
        "allergen",
        "sport",
        "book",
        "event",
        "plant",
        "friend",
    ):
        while other[key] == slots[key]:
            other[key] = maker.rng.choice(maker.vocab[key])
    phrasings = family["fact"]
    rephrased = _fill(
        phrasings[(phrasings.index(_template_of(fact, phrasings, slots)) + 2) % len(phrasings)],
        slots,
    )
    made.pairs += [
        Pair(lang, person, fact, fact.upper() if lang == "en" else fact + "！", True, "repeat"),
        Pair(lang, person, fact, bare + maker.rng.choice(family["more"]) + stop, True, "says more"),
        Pair(lang, person, fact, rephrased, True, "rephrased"),
        Pair(
            lang,
            person,
            fact,
            _fill(_template_of(fact, phrasings, slots), other),
            False,
            "another value",
        ),
        Pair(lang, person, fact, _fill(family["neg"], slots), False, "negation"),
    ]


def _template_of(fact: str, phrasings: Sequence[str], slots: dict[str, str]) -> str:
    return next(p for p in phrasings if _fill(p, slots) == fact)


def _channel(made: ConversationSet, maker: _Maker, channel: int, people: list[int]) -> None:
    """Months of chat, oldest first: chatter, the bot's short answers, and each person's few
    things worth asking about later (all said in the first five months)."""
    chatter = CHATTER_EN if maker.language == "en" else CHATTER_JA
    bot = BOT_EN if maker.language == "en" else BOT_JA
    said = SAID_EN if maker.language == "en" else SAID_JA
    events: list[tuple[float, int, str, list[str] | None]] = []
    for person in people:
        for template, asks in maker.rng.sample(said, 5):
            slots = maker.slots(made.names[person])
            asked = [_fill(q, slots) for q in maker.own(asks)]
            events.append((maker.rng.uniform(30, DAYS), person, _fill(template, slots), asked))
    for _ in range(MESSAGES_PER_CHANNEL - len(events)):
        person = maker.rng.choice(people)
        events.append(
            (
                maker.rng.uniform(0, DAYS),
                person,
                _fill(maker.rng.choice(chatter), maker.slots("")),
                None,
            )
        )
    for days_ago, person, text, questions in sorted(events, key=lambda e: -e[0]):
        message = Said(maker.next_id, channel, person, made.names[person], text, days_ago)
        maker.next_id += 1
        made.messages.append(message)
        if questions:
            ask = maker.rng.choice(questions)
            lexical = shares_word(ask, text, made.names[person])
            made.questions.append(
                Question(
                    maker.language,
                    person,
                    made.names[person],
                    channel,
                    ask,
                    message=message.id,
                    lexical=lexical,
                )
            )
        elif maker.rng.random() < 0.08:
            made.messages.append(
                Said(
                    maker.next_id,
                    channel,
                    0,
                    "companion",
                    maker.rng.choice(bot),
                    days_ago - 0.001,
                    True,
                )
            )
            maker.next_id += 1
