"""The functions the function-calling generator offers (`agentrl.data.function_tasks`):
their specs, a drawer of calls for each, and the English and Chinese phrases that ask
for one.

Each :class:`Function` has a domain (weather, finance, maths, science, travel, calendars,
shopping, devices, language, text), an OpenAI spec whose arguments cover strings, integers, numbers,
booleans, enums, arrays, nested objects and optional arguments with defaults, and phrases
(``(en, zh, optional arguments mentioned)``) that a request is made of. A drawn call
(:class:`Draw`) carries the words that fill a phrase and the other spellings its answer
accepts (a Chinese request's place names also in English, and the other way round).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_CITIES = (
    ("Paris", "巴黎"),
    ("Tokyo", "东京"),
    ("Beijing", "北京"),
    ("New York", "纽约"),
    ("London", "伦敦"),
    ("Shanghai", "上海"),
    ("Sydney", "悉尼"),
    ("Berlin", "柏林"),
    ("Singapore", "新加坡"),
    ("Toronto", "多伦多"),
)
_ROOMS = (("living room", "客厅"), ("bedroom", "卧室"), ("kitchen", "厨房"), ("office", "书房"))
_STOCKS = ("AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "BABA", "GOOGL")
_CURRENCIES = ("USD", "EUR", "CNY", "JPY", "GBP", "AUD")
_PRODUCTS = (
    ("wireless headphones", "无线耳机"),
    ("running shoes", "跑鞋"),
    ("coffee maker", "咖啡机"),
    ("backpack", "双肩包"),
    ("desk lamp", "台灯"),
)
_EVENTS = (("team meeting", "团队会议"), ("dentist appointment", "牙医预约"), ("lunch", "午餐"))
_PEOPLE = ("alice@example.com", "bob@example.com", "carol@example.com", "dan@example.com")
_LANGUAGES = (("fr", "French", "法语"), ("es", "Spanish", "西班牙语"), ("ja", "Japanese", "日语"))
_PHRASES = (
    ("Good morning", "早上好"),
    ("Thank you very much", "非常感谢"),
    ("See you soon", "回头见"),
)
UNRELATED = (
    ("Tell me a joke about cats.", "讲一个关于猫的笑话。"),
    ("Write a short poem about autumn.", "写一首关于秋天的短诗。"),
    ("Who wrote Pride and Prejudice?", "《傲慢与偏见》的作者是谁？"),
    ("Explain photosynthesis in one sentence.", "用一句话解释光合作用。"),
    ("Give me three tips for sleeping better.", "给我三个改善睡眠的建议。"),
    ("What is the capital of Australia?", "澳大利亚的首都是哪里？"),
)


def _param(kind: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": text, **extra}


def _spec(name: str, text: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": props, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": text, "parameters": parameters},
    }


def _date(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


@dataclass(frozen=True)
class Draw:
    """One drawn call: its arguments, the words that fill a request and, by argument,
    the other spellings the answer accepts."""

    args: dict[str, Any]
    words: dict[str, str]
    also: dict[str, list[Any]]


@dataclass(frozen=True)
class Function:
    """A function offered to the model: its spec, a drawer of calls and the phrases that
    ask for one (``(en, zh)`` pairs, each with the optional arguments it mentions)."""

    domain: str
    spec: dict[str, Any]
    draw: Callable[[random.Random, str], Draw]
    asks: tuple[tuple[str, str, tuple[str, ...]], ...]

    @property
    def name(self) -> str:
        return self.spec["function"]["name"]


def _pick(
    rng: random.Random, pairs: tuple[tuple[str, str], ...], lang: str
) -> tuple[str, str, str]:
    """``(English value, the request's word, Chinese value)`` of a bilingual pair: a call
    names it in English and its answer also accepts the Chinese."""
    en, zh = rng.choice(pairs)
    return en, (zh if lang == "zh" else en), zh


def _weather(rng: random.Random, lang: str) -> Draw:
    city, word, other = _pick(rng, _CITIES, lang)
    unit = rng.choice(("celsius", "fahrenheit"))
    days = rng.randint(2, 7)
    unit_word = (
        {"celsius": "摄氏度", "fahrenheit": "华氏度"}[unit] if lang == "zh" else unit.title()
    )
    args = {"city": city, "unit": unit, "days": days}
    return Draw(args, {"city": word, "unit": unit_word, "days": str(days)}, {"city": [other]})


def _air(rng: random.Random, lang: str) -> Draw:
    city, word, other = _pick(rng, _CITIES, lang)
    return Draw({"city": city}, {"city": word}, {"city": [other]})


def _stock(rng: random.Random, lang: str) -> Draw:
    symbol = rng.choice(_STOCKS)
    exchange = rng.choice(("NYSE", "HKEX"))
    return Draw(
        {"symbol": symbol, "exchange": exchange}, {"symbol": symbol, "exchange": exchange}, {}
    )


def _currency(rng: random.Random, lang: str) -> Draw:
    source, target = rng.sample(_CURRENCIES, 2)
    amount = rng.choice((rng.randint(5, 5000), round(rng.uniform(1, 999), 2)))
    words = {"amount": str(amount), "source": source, "target": target}
    return Draw({"amount": amount, "from_currency": source, "to_currency": target}, words, {})


def _loan(rng: random.Random, lang: str) -> Draw:
    principal = rng.randrange(10_000, 500_000, 1000)
    rate = rng.choice((3.5, 4.2, 5.0, 6.75))
    years = rng.choice((5, 10, 15, 30))
    words = {"principal": str(principal), "rate": str(rate), "years": str(years)}
    return Draw({"principal": principal, "annual_rate": rate, "years": years}, words, {})


def _stats(rng: random.Random, lang: str) -> Draw:
    # All integers or all decimals: BFCL's checker refuses an integer among the numbers of
    # a list it reads as floats, so a mixed list would teach a call it marks wrong.
    count = rng.randint(3, 6)
    if rng.random() < 0.5:
        numbers: list[int | float] = [rng.randint(1, 99) for _ in range(count)]
    else:
        numbers = [round(rng.uniform(1, 99), 1) for _ in range(count)]
    measure = rng.choice(("mean", "median", "max", "min"))
    zh = {"mean": "平均值", "median": "中位数", "max": "最大值", "min": "最小值"}[measure]
    joined = ("、" if lang == "zh" else ", ").join(str(n) for n in numbers)
    words = {"numbers": joined, "measure": zh if lang == "zh" else measure}
    return Draw({"numbers": numbers, "measure": measure}, words, {})


def _flight(rng: random.Random, lang: str) -> Draw:
    (a, az), (b, bz) = rng.sample(_CITIES, 2)
    date, people = _date(rng), rng.randint(2, 4)
    words = {"origin": az if lang == "zh" else a, "destination": bz if lang == "zh" else b}
    words.update(date=date, passengers=str(people))
    also = {"origin": [az], "destination": [bz]}
    args = {"origin": a, "destination": b, "date": date, "passengers": people, "nonstop": True}
    return Draw(args, words, also)


def _hotel(rng: random.Random, lang: str) -> Draw:
    city, word, other = _pick(rng, _CITIES, lang)
    date, nights = _date(rng), rng.randint(1, 6)
    adults, children = rng.randint(1, 3), rng.randint(0, 2)
    guests = {"adults": adults, "children": children}
    words = {"city": word, "date": date, "nights": str(nights)}
    words.update(adults=str(adults), children=str(children))
    args = {"city": city, "check_in": date, "nights": nights, "guests": guests}
    return Draw(args, words, {"city": [other]})


def _event(rng: random.Random, lang: str) -> Draw:
    en, word, zh = _pick(rng, _EVENTS, lang)
    date, hour = _date(rng), f"{rng.randint(8, 17):02d}:{rng.choice(('00', '30'))}"
    minutes, people = rng.choice((30, 45, 90)), rng.sample(_PEOPLE, 2)
    args = {"title": word, "date": date, "start_time": hour}
    args.update(duration_minutes=minutes, attendees=people)
    words = {"title": word, "date": date, "time": hour, "minutes": str(minutes)}
    words["people"] = (" 和 " if lang == "zh" else " and ").join(people)
    return Draw(args, words, {"title": [en if lang == "zh" else zh]})


def _products(rng: random.Random, lang: str) -> Draw:
    en, word, zh = _pick(rng, _PRODUCTS, lang)
    price = rng.choice((50, 100, 200, 80))
    args = {"query": word, "max_price": price, "in_stock_only": True, "sort_by": "rating"}
    return Draw(args, {"item": word, "price": str(price)}, {"query": [en if lang == "zh" else zh]})


def _order(rng: random.Random, lang: str) -> Draw:
    ids = rng.sample(("A-100", "B-215", "C-307", "D-442"), 2)
    counts = [rng.randint(1, 4) for _ in ids]
    items = [{"product_id": i, "quantity": q} for i, q in zip(ids, counts, strict=True)]
    link = "，" if lang == "zh" else " and "
    unit = "{q} 件 {i}" if lang == "zh" else "{q} of item {i}"
    words = {"items": link.join(unit.format(q=q, i=i) for i, q in zip(ids, counts, strict=True))}
    return Draw({"items": items, "express": True}, words, {})


def _thermostat(rng: random.Random, lang: str) -> Draw:
    room, word, other = _pick(rng, _ROOMS, lang)
    degrees = rng.choice((19, 20.5, 22, 23.5, 25))
    mode = rng.choice(("heat", "cool"))
    mode_word = {"heat": "制热", "cool": "制冷"}[mode] if lang == "zh" else mode
    words = {"room": word, "degrees": str(degrees), "mode": mode_word}
    return Draw({"room": room, "temperature": degrees, "mode": mode}, words, {"room": [other]})


def _light(rng: random.Random, lang: str) -> Draw:
    room, word, other = _pick(rng, _ROOMS, lang)
    on = rng.random() < 0.5
    switch = ("打开" if on else "关掉") if lang == "zh" else ("on" if on else "off")
    return Draw({"room": room, "on": on}, {"room": word, "switch": switch}, {"room": [other]})


def _translate(rng: random.Random, lang: str) -> Draw:
    code, en, zh = rng.choice(_LANGUAGES)
    phrase, _, _ = _pick(rng, _PHRASES, "en")
    words = {"text": phrase, "language": zh if lang == "zh" else en}
    return Draw({"text": phrase, "target_language": code}, words, {})


_LENGTH_UNITS = (("cm", "centimetres", "厘米"), ("m", "metres", "米"), ("in", "inches", "英寸"))
_SCALES = (
    ("celsius", "Celsius", "摄氏"),
    ("fahrenheit", "Fahrenheit", "华氏"),
    ("kelvin", "Kelvin", "开尔文"),
)
_TEXTS = (
    "The quick brown fox jumps over the lazy dog",
    "To be or not to be, that is the question",
    "All that glitters is not gold",
    "The early bird catches the worm, but the second mouse gets the cheese",
)


def _cylinder(rng: random.Random, lang: str) -> Draw:
    radius, height = rng.choice((1.5, 2, 3, 4.5, 6)), rng.choice((5, 7.5, 10, 12, 20))
    unit, en, zh = rng.choice(_LENGTH_UNITS)
    words = {"radius": str(radius), "height": str(height), "unit": zh if lang == "zh" else en}
    return Draw({"radius": radius, "height": height, "unit": unit}, words, {})


def _kinetic(rng: random.Random, lang: str) -> Draw:
    mass, speed = rng.choice((0.5, 2, 12, 75, 1200)), rng.choice((3, 9.8, 15, 27.5))
    digits = rng.randint(1, 4)
    places = str(digits) if lang == "zh" else f"{digits} decimal place{'s' * (digits > 1)}"
    words = {"mass": str(mass), "speed": str(speed), "digits": places}
    return Draw({"mass_kg": mass, "speed_ms": speed, "round_to": digits}, words, {})


def _temperature(rng: random.Random, lang: str) -> Draw:
    (source, s_en, s_zh), (target, t_en, t_zh) = rng.sample(_SCALES, 2)
    kelvin = source == "kelvin"  # no reading below absolute zero, in kelvins, not degrees
    value = rng.choice((77, 273.15, 300, 451) if kelvin else (-40, 0, 21.5, 37, 100, 451))
    if lang == "zh":
        reading = f"{value}{s_zh}" if kelvin else f"{s_zh}{value}度"
    else:
        reading = f"{value} kelvins" if kelvin else f"{value} degrees {s_en}"
    words = {"value": str(value), "reading": reading, "target": t_zh if lang == "zh" else t_en}
    return Draw({"value": value, "from_scale": source, "to_scale": target}, words, {})


def _resistor(rng: random.Random, lang: str) -> Draw:
    volts, ohms = rng.choice((1.5, 5, 9, 12, 230)), rng.choice((10, 47, 220, 1000))
    quantity = rng.choice(("current", "power"))
    word = {"current": "电流", "power": "功率"}[quantity] if lang == "zh" else quantity
    words = {"volts": str(volts), "ohms": str(ohms), "quantity": word}
    return Draw({"voltage": volts, "resistance": ohms, "solve_for": quantity}, words, {})


def _words(rng: random.Random, lang: str) -> Draw:
    text = rng.choice(_TEXTS)
    return Draw({"text": text, "unique_only": True}, {"text": text}, {})


def _summary(rng: random.Random, lang: str) -> Draw:
    text = rng.choice(_TEXTS)
    count = rng.randint(2, 4)
    words = {"text": text, "count": str(count)}
    return Draw({"text": text, "max_points": count, "style": "bullets"}, words, {})


_UNIT = _param("string", "temperature unit", enum=["celsius", "fahrenheit"], default="celsius")
FUNCTIONS: tuple[Function, ...] = (
    Function(
        "weather",
        _spec(
            "get_weather",
            "Current weather and forecast for a city.",
            {
                "city": _param("string", "city name"),
                "unit": _UNIT,
                "days": _param("integer", "days of forecast", default=1),
            },
            ["city"],
        ),
        _weather,
        (
            ("check the weather in {city}", "查询{city}的天气", ()),
            ("get the weather in {city} in {unit}", "用{unit}查询{city}的天气", ("unit",)),
            ("get a {days}-day forecast for {city}", "查询{city}未来{days}天的天气预报", ("days",)),
        ),
    ),
    Function(
        "weather",
        _spec(
            "get_air_quality",
            "Air quality index of a city.",
            {"city": _param("string", "city name")},
            ["city"],
        ),
        _air,
        (("check the air quality in {city}", "查询{city}的空气质量", ()),),
    ),
    Function(
        "finance",
        _spec(
            "get_stock_price",
            "Latest price of a stock.",
            {
                "symbol": _param("string", "ticker symbol"),
                "exchange": _param(
                    "string", "exchange", enum=["NASDAQ", "NYSE", "HKEX"], default="NASDAQ"
                ),
            },
            ["symbol"],
        ),
        _stock,
        (
            ("get the stock price of {symbol}", "查询{symbol}的股价", ()),
            (
                "get the price of {symbol} on the {exchange}",
                "查询{symbol}在{exchange}的股价",
                ("exchange",),
            ),
        ),
    ),
    Function(
        "finance",
        _spec(
            "convert_currency",
            "Convert an amount between currencies.",
            {
                "amount": _param("number", "amount to convert"),
                "from_currency": _param("string", "ISO code of the source currency"),
                "to_currency": _param("string", "ISO code of the target currency"),
            },
            ["amount", "from_currency", "to_currency"],
        ),
        _currency,
        (("convert {amount} {source} to {target}", "把{amount}{source}换算成{target}", ()),),
    ),
    Function(
        "math",
        _spec(
            "calculate_loan_payment",
            "Monthly payment of a fixed-rate loan.",
            {
                "principal": _param("number", "loan amount"),
                "annual_rate": _param("number", "annual interest rate in percent"),
                "years": _param("integer", "loan term in years"),
            },
            ["principal", "annual_rate", "years"],
        ),
        _loan,
        (
            (
                "work out the monthly payment on a {principal} loan at {rate}% over {years} years",
                "计算贷款{principal}元、年利率{rate}%、期限{years}年的月供",
                (),
            ),
        ),
    ),
    Function(
        "math",
        _spec(
            "compute_statistic",
            "A summary statistic of a list of numbers.",
            {
                "numbers": _param("array", "the numbers", items={"type": "number"}),
                "measure": _param(
                    "string", "which statistic", enum=["mean", "median", "max", "min"]
                ),
            },
            ["numbers", "measure"],
        ),
        _stats,
        (("find the {measure} of {numbers}", "求{numbers}的{measure}", ()),),
    ),
    Function(
        "travel",
        _spec(
            "search_flights",
            "Search flights between two cities on a date.",
            {
                "origin": _param("string", "departure city"),
                "destination": _param("string", "arrival city"),
                "date": _param("string", "date, YYYY-MM-DD"),
                "passengers": _param("integer", "number of passengers", default=1),
                "nonstop": _param("boolean", "only nonstop flights", default=False),
            },
            ["origin", "destination", "date"],
        ),
        _flight,
        (
            (
                "find flights from {origin} to {destination} on {date}",
                "查一下{date}从{origin}到{destination}的航班",
                (),
            ),
            (
                "find nonstop flights from {origin} to {destination} on {date} "
                "for {passengers} people",
                "查一下{date}从{origin}到{destination}的直飞航班，{passengers}个人",
                ("passengers", "nonstop"),
            ),
        ),
    ),
    Function(
        "travel",
        _spec(
            "book_hotel",
            "Book a hotel room.",
            {
                "city": _param("string", "city"),
                "check_in": _param("string", "check-in date, YYYY-MM-DD"),
                "nights": _param("integer", "number of nights"),
                "guests": _param(
                    "object",
                    "who stays",
                    properties={
                        "adults": _param("integer", "adults"),
                        "children": _param("integer", "children"),
                    },
                    required=["adults", "children"],
                ),
            },
            ["city", "check_in", "nights", "guests"],
        ),
        _hotel,
        (
            (
                "book a hotel in {city} from {date} for {nights} nights "
                "for {adults} adults and {children} children",
                "预订{city}的酒店，{date}入住，住{nights}晚，{adults}个大人{children}个孩子",
                (),
            ),
        ),
    ),
    Function(
        "calendar",
        _spec(
            "create_event",
            "Add an event to the calendar.",
            {
                "title": _param("string", "event title"),
                "date": _param("string", "date, YYYY-MM-DD"),
                "start_time": _param("string", "start time, HH:MM"),
                "duration_minutes": _param("integer", "length in minutes", default=60),
                "attendees": _param(
                    "array", "email addresses to invite", items={"type": "string"}, default=[]
                ),
            },
            ["title", "date", "start_time"],
        ),
        _event,
        (
            ("schedule a {title} on {date} at {time}", "在{date} {time}安排一个{title}", ()),
            (
                "schedule a {minutes}-minute {title} on {date} at {time} with {people}",
                "在{date} {time}安排一个{minutes}分钟的{title}，邀请{people}",
                ("duration_minutes", "attendees"),
            ),
        ),
    ),
    Function(
        "shopping",
        _spec(
            "search_products",
            "Search the shop's catalogue.",
            {
                "query": _param("string", "what to look for"),
                "max_price": _param("number", "highest price in USD"),
                "in_stock_only": _param("boolean", "only items in stock", default=False),
                "sort_by": _param(
                    "string", "order", enum=["relevance", "price", "rating"], default="relevance"
                ),
            },
            ["query"],
        ),
        _products,
        (
            (
                "search for {item} under {price} dollars",
                "搜索{price}美元以内的{item}",
                ("max_price",),
            ),
            (
                "search for {item} under {price} dollars that are in stock, best rated first",
                "搜索有货的{price}美元以内的{item}，按评分排序",
                ("max_price", "in_stock_only", "sort_by"),
            ),
        ),
    ),
    Function(
        "shopping",
        _spec(
            "place_order",
            "Order items by product id.",
            {
                "items": _param(
                    "array",
                    "the items",
                    items={
                        "type": "object",
                        "properties": {
                            "product_id": _param("string", "product id"),
                            "quantity": _param("integer", "how many"),
                        },
                        "required": ["product_id", "quantity"],
                    },
                ),
                "express": _param("boolean", "express shipping", default=False),
            },
            ["items"],
        ),
        _order,
        (
            ("order {items}", "下单购买{items}", ()),
            ("order {items} with express shipping", "下单购买{items}，用加急配送", ("express",)),
        ),
    ),
    Function(
        "devices",
        _spec(
            "set_thermostat",
            "Set a room's thermostat.",
            {
                "room": _param("string", "room"),
                "temperature": _param("number", "target temperature in Celsius"),
                "mode": _param("string", "mode", enum=["heat", "cool", "auto"], default="auto"),
            },
            ["room", "temperature"],
        ),
        _thermostat,
        (
            ("set the {room} thermostat to {degrees} degrees", "把{room}的温度设为{degrees}度", ()),
            (
                "set the {room} thermostat to {degrees} degrees in {mode} mode",
                "把{room}的空调设为{mode}模式{degrees}度",
                ("mode",),
            ),
        ),
    ),
    Function(
        "devices",
        _spec(
            "toggle_light",
            "Switch a room's lights on or off.",
            {"room": _param("string", "room"), "on": _param("boolean", "true: on, false: off")},
            ["room", "on"],
        ),
        _light,
        (("turn {switch} the lights in the {room}", "{switch}{room}的灯", ()),),
    ),
    Function(
        "language",
        _spec(
            "translate_text",
            "Translate text into another language.",
            {
                "text": _param("string", "text to translate"),
                "target_language": _param(
                    "string", "language code", enum=["en", "zh", "fr", "es", "ja"]
                ),
            },
            ["text", "target_language"],
        ),
        _translate,
        (('translate "{text}" into {language}', "把“{text}”翻译成{language}", ()),),
    ),
    Function(
        "science",
        _spec(
            "cylinder_volume",
            "Volume of a right circular cylinder.",
            {
                "radius": _param("number", "radius of the base"),
                "height": _param("number", "height"),
                "unit": _param(
                    "string", "length unit of both", enum=["cm", "m", "in"], default="cm"
                ),
            },
            ["radius", "height"],
        ),
        _cylinder,
        (
            (
                "find the volume of a cylinder with radius {radius} and height {height}",
                "计算半径{radius}、高{height}的圆柱体积",
                (),
            ),
            (
                "find the volume of a cylinder with radius {radius} {unit} and height "
                "{height} {unit}",
                "计算半径{radius}{unit}、高{height}{unit}的圆柱体积",
                ("unit",),
            ),
        ),
    ),
    Function(
        "science",
        _spec(
            "kinetic_energy",
            "Kinetic energy of a moving mass, in joules.",
            {
                "mass_kg": _param("number", "mass in kilograms"),
                "speed_ms": _param("number", "speed in metres per second"),
                "round_to": _param("integer", "decimal places of the result", default=2),
            },
            ["mass_kg", "speed_ms"],
        ),
        _kinetic,
        (
            (
                "compute the kinetic energy of a {mass} kg mass moving at {speed} m/s",
                "计算质量{mass}千克、速度{speed}米每秒的物体的动能",
                (),
            ),
            (
                "compute the kinetic energy of a {mass} kg mass moving at {speed} m/s, "
                "rounded to {digits}",
                "计算质量{mass}千克、速度{speed}米每秒的物体的动能，保留{digits}位小数",
                ("round_to",),
            ),
        ),
    ),
    Function(
        "science",
        _spec(
            "convert_temperature",
            "Convert a temperature between scales.",
            {
                "value": _param("number", "the temperature"),
                "from_scale": _param(
                    "string", "its scale", enum=["celsius", "fahrenheit", "kelvin"]
                ),
                "to_scale": _param(
                    "string", "the scale wanted", enum=["celsius", "fahrenheit", "kelvin"]
                ),
            },
            ["value", "from_scale", "to_scale"],
        ),
        _temperature,
        (
            (
                "convert {reading} to {target}",
                "把{reading}换算成{target}温度",
                (),
            ),
        ),
    ),
    Function(
        "science",
        _spec(
            "resistor_circuit",
            "Current (amperes) or power (watts) in a resistor at a voltage, by Ohm's law.",
            {
                "voltage": _param("number", "voltage in volts"),
                "resistance": _param("number", "resistance in ohms"),
                "solve_for": _param(
                    "string", "what to compute", enum=["current", "power"], default="current"
                ),
            },
            ["voltage", "resistance"],
        ),
        _resistor,
        (
            (
                "work out the {quantity} in a {ohms} ohm resistor at {volts} volts",
                "计算{volts}伏电压下{ohms}欧电阻的{quantity}",
                ("solve_for",),
            ),
        ),
    ),
    Function(
        "text",
        _spec(
            "count_words",
            "Count the words of a text.",
            {
                "text": _param("string", "the text"),
                "unique_only": _param("boolean", "count each distinct word once", default=False),
            },
            ["text"],
        ),
        _words,
        (
            ('count the words in "{text}"', "数一数“{text}”有多少个词", ()),
            (
                'count the distinct words in "{text}"',
                "数一数“{text}”里有多少个不同的词",
                ("unique_only",),
            ),
        ),
    ),
    Function(
        "text",
        _spec(
            "summarize_text",
            "Summarize a text.",
            {
                "text": _param("string", "the text"),
                "max_points": _param("integer", "most points (or sentences) in it", default=3),
                "style": _param(
                    "string", "how to write it", enum=["plain", "bullets"], default="plain"
                ),
            },
            ["text"],
        ),
        _summary,
        (
            ('summarize "{text}"', "总结一下“{text}”", ()),
            (
                'summarize "{text}" in at most {count} bullet points',
                "用不超过{count}个要点总结“{text}”",
                ("max_points", "style"),
            ),
        ),
    ),
)


__all__ = ["FUNCTIONS", "UNRELATED", "Draw", "Function"]
